#include "cli/api_client.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "api/json_reader.h"
#include "cli/client_commands.h"
#include "cli/format.h"

namespace gpool::cli {

namespace {

constexpr std::string_view kTokenHint =
    "create one with `gpool token create` on the controller's server (over its Unix socket), "
    "then set GPOOL_TOKEN or save it with `gpool token create --save`";

// HOST:PORT or [IPv6]:PORT.
Status parseServer(const std::string& text, std::string* host, int* port) {
  auto bad = [&] {
    return Status::invalidArgument("--server '" + text +
                                   "': expected HOST:PORT, the controller's TLS listener "
                                   "(controller.tls_listen), e.g. gpu-ctl.example.org:6443");
  };
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return bad();
  std::string h = text.substr(0, colon);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return bad();
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string::npos) {
    return bad();  // an IPv6 address needs brackets
  }
  std::string_view p = std::string_view(text).substr(colon + 1);
  int n = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), n);
  if (ec != std::errc() || end != p.data() + p.size() || n < 1 || n > 65535) return bad();
  *host = h;
  *port = n;
  return Status::ok();
}

std::string homeDir() {
  const char* home = std::getenv("HOME");
  if (home && *home) return home;
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && pw.pw_dir) {
    return pw.pw_dir;
  }
  return "";
}

bool fileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::string defaultTokenFile() {
  std::string home = homeDir();
  return home.empty() ? "" : home + "/.config/gpool/token";
}

Result<std::string> readTokenFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return Status::invalidArgument("token file " + path +
                                     " does not exist (save a token there with `gpool token "
                                     "create --save`, or set GPOOL_TOKEN)");
    }
    return Status::ioError("cannot read token file " + path + ": " + std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::permissionDenied("token file " + path + " has mode " + mode +
                                    ": it must not be accessible by group or others, so it "
                                    "is not used; fix it with `chmod 600 " +
                                    path + "`");
  }
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    if (in.eof()) return Status::invalidArgument("token file " + path + " is empty");
    return Status::ioError("cannot read token file " + path);
  }
  size_t b = line.find_first_not_of(" \t\r");
  size_t e = line.find_last_not_of(" \t\r");
  if (b == std::string::npos) return Status::invalidArgument("token file " + path + " is empty");
  return line.substr(b, e - b + 1);
}

Result<ControllerTarget> controllerTarget(const GlobalOptions& global) {
  ControllerTarget t;
  if (global.socket_given && global.server_given) {
    return Status::invalidArgument(
        "--socket and --server exclude each other: --socket for gpoold on this machine, "
        "--server HOST:PORT for its TLS listener");
  }
  // Several controllers (HA): comma-separated, the first tried first.
  auto split = [](const std::string& list) {
    std::vector<std::string> out;
    for (size_t b = 0; b <= list.size();) {
      size_t e = std::min(list.find(',', b), list.size());
      if (e > b) out.push_back(list.substr(b, e - b));
      b = e + 1;
    }
    return out;
  };
  const std::string server = effectiveServer(global);
  if (server.empty()) {
    std::vector<std::string> sockets = split(global.socket);
    if (sockets.empty()) sockets.push_back(global.socket);
    t.endpoint = net::ClientEndpoint::unixSocket(sockets[0]);
    for (size_t i = 1; i < sockets.size(); ++i)
      t.alternates.push_back(net::ClientEndpoint::unixSocket(sockets[i]));
    return t;
  }
  std::vector<std::string> servers = split(server);
  if (servers.empty()) servers.push_back(server);
  std::vector<std::pair<std::string, int>> hosts;
  for (const std::string& one : servers) {
    std::string h;
    int p = 0;
    GPOOL_RETURN_IF_ERROR(parseServer(one, &h, &p));
    hosts.emplace_back(h, p);
  }
  // An explicit --token-file wins over the environment, the environment over the default file.
  std::string token;
  const char* env = std::getenv("GPOOL_TOKEN");
  if (!global.token_file.empty()) {
    GPOOL_ASSIGN_OR_RETURN(token, readTokenFile(global.token_file));
    t.token_source = "--token-file " + global.token_file;
  } else if (env && *env) {
    token = env;
    t.token_source = "$GPOOL_TOKEN";
  } else {
    std::string path = defaultTokenFile();
    if (!path.empty() && fileExists(path)) {
      GPOOL_ASSIGN_OR_RETURN(token, readTokenFile(path));
      t.token_source = path;
    }
  }
  if (token.empty()) {
    return Status::unauthenticated(
        "no API token for --server " + server +
        " (set GPOOL_TOKEN, name a file with --token-file, or save one in ~/.config/gpool/token "
        "with mode 0600): " +
        std::string(kTokenHint));
  }
  t.endpoint = net::ClientEndpoint::tls(hosts[0].first, hosts[0].second, global.ca_file, token);
  for (size_t i = 1; i < hosts.size(); ++i) {
    t.alternates.push_back(
        net::ClientEndpoint::tls(hosts[i].first, hosts[i].second, global.ca_file, token));
  }
  return t;
}

Status refusedToken(const ControllerTarget& target, std::string_view message) {
  return Status::unauthenticated("gpoold at " + target.endpoint.describe() +
                                 " refused the API token from " + target.token_source + ": " +
                                 std::string(message) + "; " + std::string(kTokenHint));
}

ApiClient::ApiClient(ControllerTarget target) : target_(std::move(target)) {
  controllers_.push_back(target_.endpoint);
  controllers_.insert(controllers_.end(), target_.alternates.begin(), target_.alternates.end());
  http_ = std::make_unique<net::HttpClient>(target_.endpoint);
}

Result<ApiClient> ApiClient::connect(const GlobalOptions& global) {
  GPOOL_ASSIGN_OR_RETURN(ControllerTarget t, controllerTarget(global));
  return ApiClient(std::move(t));
}

void ApiClient::useController(size_t i) {
  at_ = i;
  target_.endpoint = controllers_[i];
  http_ = std::make_unique<net::HttpClient>(target_.endpoint);
}

Result<net::Response> ApiClient::requestLeader(net::Method method, const std::string& target,
                                               const std::string& body) {
  Result<net::Response> r = http_->request(method, target, body);
  if (controllers_.size() < 2) return r;
  const auto deadline = std::chrono::steady_clock::now() + kFindLeaderFor;
  auto pause = std::chrono::milliseconds(200);
  for (size_t tried = 1;; ++tried) {
    // Only answers that say nothing was done: the connection was refused, or the controller
    // does not lead (a standby names the leader; a deposed leader's write was refused).
    bool refused = !r.ok() && r.status().code() == StatusCode::kUnavailable &&
                   r.status().message().rfind("cannot connect to", 0) == 0;
    std::string leader;
    bool not_leading = false;
    if (r.ok() && r->status == 503) {
      leader = net::namedLeader(r->status, r->header("Gpool-Leader"), r->body);
      not_leading = !leader.empty() || r->body.find("standby") != std::string::npos ||
                    r->body.find("not the leader") != std::string::npos;
    }
    if (!refused && !not_leading) return r;
    if (std::chrono::steady_clock::now() >= deadline) return r;
    size_t next = net::findEndpoint(controllers_, leader);
    if (next == std::string_view::npos || next == at_) next = (at_ + 1) % controllers_.size();
    if (tried % controllers_.size() == 0) {
      // A whole round without a leader: a takeover is under way.
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(2000));
    }
    useController(next);
    r = http_->request(method, target, body);
  }
}

Result<json> ApiClient::call(net::Method method, const std::string& target, std::string body) {
  Result<net::Response> r = requestLeader(method, target, body);
  const net::ClientEndpoint& ep = target_.endpoint;
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kUnavailable && ep.isUnix()) {
      return Status::unavailable(
          "cannot reach gpoold at unix:" + ep.unix_socket_path + " (" + r.status().message() +
          "): is it running? Start it with `systemctl start gpoold` (or `gpoold --config "
          "FILE` with controller.socket set), or point --socket or GPOOL_SOCKET at its socket");
    }
    if (r.status().code() == StatusCode::kUnavailable) {
      const std::string& m = r.status().message();
      bool handshake = m.find("TLS handshake") != std::string::npos;
      bool certificate =
          m.find("certificate") != std::string::npos || m.find("verify") != std::string::npos;
      std::string hint;
      if (handshake && certificate) {
        hint = ep.ca_file.empty()
                   ? ": the system's trust store does not accept gpoold's certificate; pass the "
                     "CA that signed it with --ca FILE (or GPOOL_CA)"
                   : ": the CA in " + ep.ca_file +
                         " (--ca) did not sign gpoold's certificate, or the certificate does not "
                         "name " +
                         ep.host + "; pass the CA of controller.tls_cert with --ca FILE";
      } else if (handshake) {
        hint = ": is HOST:PORT gpoold's TLS listener (controller.tls_listen)?";
      } else {
        hint =
            ": is gpoold running there with controller.tls_listen set, and the port reachable "
            "from here?";
      }
      return Status::unavailable("cannot reach gpoold at " + ep.describe() + " (" + m + ")" + hint);
    }
    return r.status().withContext("gpoold at " + ep.describe());
  }
  Result<json> parsed = api::parseJsonText(r->body, "gpoold's answer");
  if (r->status >= 400) {
    if (parsed.ok() && parsed->is_object() && parsed->contains("error") &&
        (*parsed)["error"].is_object()) {
      const json& e = (*parsed)["error"];
      std::string code = e.value("code", "internal");
      std::string message = e.value("message", "");
      if (r->status == 401 && !ep.isUnix()) {
        return refusedToken(target_, message);
      }
      if (r->status == 503) {
        // An expected, passing condition (a full or read-only store, an agent away): the
        // request was refused and nothing changed; scripts retry on exit 7.
        std::optional<std::string> retry = r->header("Retry-After");
        return Status::unavailable("gpoold refused this for now: " + message +
                                   "; nothing was changed, try again" +
                                   (retry ? " in " + *retry + " s" : " later"));
      }
      return Status(codeFromName(code), message);
    }
    return Status::internal("gpoold answered HTTP " + std::to_string(r->status) + ": " + r->body);
  }
  return parsed;
}

Result<std::string> ApiClient::callerName() {
  if (!remote()) return currentUser();
  GPOOL_ASSIGN_OR_RETURN(json account, get("/v1/account"));
  if (!account.is_object() || !account.contains("user") || !account["user"].is_string()) {
    return Status::internal("gpoold's account answer names no user");
  }
  return account["user"].get<std::string>();
}

Status requireLocal(const GlobalOptions& global, std::string_view command, std::string_view why) {
  if (effectiveServer(global).empty()) return Status::ok();
  return Status::invalidArgument("`gpool " + std::string(command) +
                                 "` does not work with --server: " + std::string(why) +
                                 "; run it without --server on a server of the pool");
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

Result<JobRef> parseJobRef(const std::string& text) {
  JobRef ref;
  ref.text = text;
  auto bad = [&] {
    return Status::invalidArgument("'" + text +
                                   "' is not a job id (use a number such as 42, or 42_3 for "
                                   "element 3 of array job 42)");
  };
  std::string_view id_part = text;
  size_t underscore = text.find('_');
  if (underscore != std::string::npos) {
    id_part = std::string_view(text).substr(0, underscore);
    std::string_view index_part = std::string_view(text).substr(underscore + 1);
    uint32_t index = 0;
    auto [p, ec] = std::from_chars(index_part.data(), index_part.data() + index_part.size(), index);
    if (index_part.empty() || ec != std::errc() || p != index_part.data() + index_part.size()) {
      return bad();
    }
    ref.array_index = index;
  }
  auto [p, ec] = std::from_chars(id_part.data(), id_part.data() + id_part.size(), ref.id);
  if (id_part.empty() || ec != std::errc() || p != id_part.data() + id_part.size() || ref.id == 0) {
    return bad();
  }
  return ref;
}

Result<std::vector<api::Job>> jobsFrom(const json& page, std::vector<json>* raw) {
  std::vector<api::Job> jobs;
  if (!page.contains("jobs") || !page["jobs"].is_array()) {
    return Status::internal("gpoold's job list has no 'jobs' array");
  }
  for (const json& j : page["jobs"]) {
    api::Job job;
    GPOOL_RETURN_IF_ERROR(api::fromJson(j, &job, "gpoold's job"));
    jobs.push_back(std::move(job));
    if (raw) raw->push_back(j);
  }
  return jobs;
}

// Every job matching `query` (without after/limit), following next_after to the end.
Result<std::vector<api::Job>> listAll(ApiClient& api, const std::string& query,
                                      std::vector<json>* raw) {
  std::vector<api::Job> all;
  int64_t after = 0;
  while (true) {
    std::string target =
        "/v1/jobs?limit=" + std::to_string(kPageSize) + "&after=" + std::to_string(after) + query;
    GPOOL_ASSIGN_OR_RETURN(json page, api.get(target));
    GPOOL_ASSIGN_OR_RETURN(std::vector<api::Job> jobs, jobsFrom(page, raw));
    all.insert(all.end(), jobs.begin(), jobs.end());
    if (!page.contains("next_after") || page["next_after"].is_null()) break;
    int64_t next = page["next_after"].get<int64_t>();
    if (next <= after) return Status::internal("gpoold's next_after did not advance");
    after = next;
  }
  return all;
}

// The job id of `ref`: itself, or the element of an array found by listing from the array's
// id on (the elements of an array get consecutive ids in one transaction).
Result<uint64_t> resolve(ApiClient& api, const JobRef& ref) {
  if (!ref.array_index) return ref.id;
  int64_t after = static_cast<int64_t>(ref.id) - 1;
  while (true) {
    std::string target =
        "/v1/jobs?limit=" + std::to_string(kPageSize) + "&after=" + std::to_string(after);
    GPOOL_ASSIGN_OR_RETURN(json page, api.get(target));
    GPOOL_ASSIGN_OR_RETURN(std::vector<api::Job> jobs, jobsFrom(page, nullptr));
    for (const api::Job& job : jobs) {
      if (job.array_job_id != ref.id) {
        return Status::notFound("job " + ref.text + " not found (job " + std::to_string(ref.id) +
                                " has no array element " + std::to_string(*ref.array_index) + ")");
      }
      if (job.array_index == ref.array_index) return job.id;
    }
    if (jobs.empty() || page["next_after"].is_null()) break;
    after = page["next_after"].get<int64_t>();
  }
  return Status::notFound("job " + ref.text + " not found");
}

TimePoint now() {
  return realClock().now();
}

std::string activeStatesQuery() {
  return "&state=PENDING&state=RUNNING&state=COMPLETING";
}

std::function<void()> reporting(std::function<Status()> body) {
  return [body = std::move(body)] {
    Status s = body();
    if (s.isOk()) return;
    // The message may quote what a user stored (a name, a reason): shown escaped.
    std::cerr << "gpool: " << terminalSafe(s.message()) << "\n";
    throw CLI::RuntimeError(exitCodeFor(s.code()));
  };
}

}  // namespace gpool::cli
