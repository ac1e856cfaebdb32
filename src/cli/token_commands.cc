#include "cli/token_commands.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "cli/client_commands.h"
#include "cli/format.h"
#include "common/status.h"
#include "common/units.h"

namespace gpool::cli {

namespace {

using nlohmann::json;

const std::string kFooter =
    "Global options (before or after the command):\n"
    "  --socket PATH      the controller's Unix socket (default: $GPOOL_SOCKET, else "
    "/run/gpool/gpoold.sock)\n"
    "  --server HOST:PORT the controller's TLS listener instead (default: $GPOOL_SERVER), with\n"
    "  --ca FILE          the CA of its certificate (default: $GPOOL_CA, else the system's)\n"
    "  --token-file FILE  your API token (default: $GPOOL_TOKEN, else ~/.config/gpool/token)\n"
    "  --json             print JSON (the server's answer) instead of tables\n"
    "Exit codes: 0 ok, 2 bad arguments, 3 not found, 4 permission denied or no/refused token, "
    "5 wrong state, 7 controller unreachable (docs/cli-exit-codes.md)\n";

struct CreateArgs {
  std::string name;
  std::string user;
  std::string expires_in;
  bool save = false;
};

struct JoinArgs {
  std::string name;
  std::string node;  // empty: any new node
  std::string expires_in = "1h";
  bool reusable = false;
};

// The server's field names in messages become the flags that set them.
Status withFlags(Status s) {
  if (s.isOk()) return s;
  std::string m = s.message();
  for (auto [field, flag] :
       {std::pair<std::string_view, std::string_view>{"body.expires_in", "--expires-in"},
        {"body.name", "--name"},
        {"body.node", "--node"},
        {"body.user", "--user"}}) {
    for (size_t at = m.find(field); at != std::string::npos; at = m.find(field, at)) {
      m.replace(at, field.size(), flag);
    }
  }
  return Status(s.code(), m);
}

Status checkDuration(const std::string& text) {
  Result<int64_t> d = parseDuration(text);
  if (!d.ok())
    return Status::invalidArgument("--expires-in '" + text + "': " + d.status().message());
  if (*d <= 0) return Status::invalidArgument("--expires-in '" + text + "': must be positive");
  return Status::ok();
}

std::string utcTime(const json& j, const std::string& key, const std::string& none) {
  if (!j.contains(key) || !j[key].is_number_integer()) return none;
  time_t t = static_cast<time_t>(j[key].get<int64_t>() / 1'000'000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

// Writes `token` to `path` with mode 0600 (its directory made 0700 when missing), replacing
// what was there through a rename, so that no reader sees half a token.
Status saveToken(const std::string& path, const std::string& token) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    std::string dir = path.substr(0, slash);
    // Each missing level of the path is created 0700 (~/.config too when it does not exist).
    for (size_t at = dir.find('/', 1);; at = dir.find('/', at + 1)) {
      std::string part = at == std::string::npos ? dir : dir.substr(0, at);
      if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
        return Status::ioError("cannot create " + part + ": " + std::strerror(errno));
      }
      if (at == std::string::npos) break;
    }
  }
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::ioError("cannot write " + tmp + ": " + std::strerror(errno));
  std::string text = token + "\n";
  bool ok = ::fchmod(fd, 0600) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  int err = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    ::unlink(tmp.c_str());
    return Status::ioError("cannot write " + path + ": " + std::strerror(err));
  }
  return Status::ok();
}

Status runCreate(const GlobalOptions& global, const CreateArgs& a) {
  if (!a.expires_in.empty()) GPOOL_RETURN_IF_ERROR(checkDuration(a.expires_in));
  std::string save_path;
  if (a.save) {
    save_path = global.token_file.empty() ? defaultTokenFile() : global.token_file;
    if (save_path.empty()) {
      return Status::invalidArgument(
          "--save: no home directory known; name the file with "
          "--token-file FILE");
    }
  }
  json body = json::object();
  if (!a.name.empty()) body["name"] = a.name;
  if (!a.user.empty()) body["user"] = a.user;
  if (!a.expires_in.empty()) body["expires_in"] = a.expires_in;
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.post("/v1/tokens", body.dump());
  if (!answer.ok()) {
    Status s = withFlags(answer.status());
    if (s.code() == StatusCode::kPermissionDenied && !a.user.empty()) {
      return Status(s.code(), "--user " + a.user +
                                  ": only admins create tokens for other users (gpoold: " +
                                  s.message() + ")");
    }
    return s;
  }
  std::string token = answer->value("token", "");
  if (token.empty()) return Status::internal("gpoold's answer holds no token: " + answer->dump());
  if (global.json) {
    printJson(*answer);
  } else {
    // The token alone on stdout (TOKEN=$(gpool token create)); what it is on stderr.
    std::cout << token << "\n" << std::flush;
    std::cerr << "Created API token " << answer->value("id", int64_t{0})
              << (a.name.empty() ? "" : " '" + a.name + "'") << " for " << answer->value("user", "")
              << ", expires " << utcTime(*answer, "expires_us", "never")
              << (answer->contains("expires_us") ? " UTC" : "")
              << ". It is shown only now: keep it like a password.\n";
  }
  if (a.save) {
    GPOOL_RETURN_IF_ERROR(saveToken(save_path, token));
    std::cerr << "Saved to " << save_path
              << " (mode 0600); `gpool --server HOST:PORT ...` uses it from there.\n";
  } else if (!global.json) {
    std::cerr << "Use it with GPOOL_TOKEN=... gpool --server HOST:PORT --ca CA.pem ..., or keep "
                 "it in ~/.config/gpool/token (mode 0600; `--save` does that).\n";
  }
  return Status::ok();
}

Status runList(const GlobalOptions& global) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json answer, api.get("/v1/tokens"));
  if (global.json) {
    printJson(answer);
    return Status::ok();
  }
  if (!answer.contains("tokens") || !answer["tokens"].is_array()) {
    return Status::internal("gpoold's token list has no 'tokens' array");
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& t : answer["tokens"]) {
    std::string expires = utcTime(t, "expires_us", "never");
    if (t.contains("revoked_us")) expires = "revoked " + utcTime(t, "revoked_us", "");
    std::string name = t.value("name", "");
    if (t.value("kind", "") == "node" && t.contains("node")) {
      name = name.empty() ? "node " + t.value("node", "") : name;
    }
    rows.push_back({std::to_string(t.value("id", int64_t{0})), name.empty() ? "-" : name,
                    t.value("user", ""), t.value("kind", ""), utcTime(t, "created_us", "-"),
                    expires, utcTime(t, "last_used_us", "never")});
  }
  if (rows.empty()) {
    std::cout << "No API tokens (create one with `gpool token create`)\n";
    return Status::ok();
  }
  std::cout << formatTable({"ID", "NAME", "USER", "KIND", "CREATED", "EXPIRES", "LAST_USED"}, rows,
                           {Align::kRight});
  return Status::ok();
}

Status runRevoke(const GlobalOptions& global, const std::string& id_text) {
  int64_t id = 0;
  auto [p, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
  if (id_text.empty() || ec != std::errc() || p != id_text.data() + id_text.size() || id <= 0) {
    return Status::invalidArgument("'" + id_text +
                                   "' is not a token id (the ID column of `gpool token list`)");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.del("/v1/tokens/" + id_text);
  if (!answer.ok()) {
    if (answer.status().code() == StatusCode::kNotFound) {
      return Status::notFound("no token " + id_text + " (see `gpool token list`)");
    }
    if (answer.status().code() == StatusCode::kPermissionDenied) {
      return Status::permissionDenied("token " + id_text +
                                      " is not yours; only admins revoke other users' tokens "
                                      "(gpoold: " +
                                      answer.status().message() + ")");
    }
    return answer.status();
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::cout << "Revoked " << answer->value("kind", "") << " token " << id_text << " of "
            << answer->value("user", "") << "; requests with it are now refused\n";
  return Status::ok();
}

Status runJoinCreate(const GlobalOptions& global, const JoinArgs& a) {
  GPOOL_RETURN_IF_ERROR(checkDuration(a.expires_in));
  json body{{"expires_in", a.expires_in}, {"reusable", a.reusable}};
  if (!a.name.empty()) body["name"] = a.name;
  if (!a.node.empty()) body["node"] = a.node;
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.post("/v1/join-tokens", body.dump());
  if (!answer.ok()) {
    Status s = withFlags(answer.status());
    if (s.code() == StatusCode::kPermissionDenied) {
      return Status(s.code(),
                    "permission denied: `gpool join-token create` needs the admin role "
                    "(gpoold: " +
                        s.message() +
                        "); ask an admin, or run it as root on the controller's server");
    }
    return s;
  }
  std::string token = answer->value("token", "");
  if (token.empty()) return Status::internal("gpoold's answer holds no token: " + answer->dump());
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::string server = effectiveServer(global);
  bool placeholder = server.empty();
  if (placeholder) server = "CONTROLLER:6443";
  std::string ca = global.ca_file.empty() ? "/etc/gpool/tls/ca.pem" : global.ca_file;
  std::cout << token << "\n" << std::flush;
  std::cerr << "Created " << (a.reusable ? "a reusable" : "a one-time") << " join token "
            << answer->value("id", int64_t{0}) << ", expires "
            << utcTime(*answer, "expires_us", "never")
            << " UTC. On the new GPU server, as root:\n\n"
            << "  gpool-agent --node NAME --server " << server << " --ca " << ca
            << " \\\n      --join-token " << token
            << " --token-file /var/lib/gpool/agent/credential\n\n"
            << (placeholder ? "(CONTROLLER:6443: the controller's controller.tls_listen address.) "
                            : "")
            << "The agent swaps it for its own credential, kept in --token-file.\n";
  return Status::ok();
}

}  // namespace

void registerTokenCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global) {
  auto* token = app.add_subcommand(
      "token", "API tokens: use the pool from other machines (gpool --server HOST:PORT)");
  token->require_subcommand(1);
  token->footer(kFooter);
  {
    auto a = std::make_shared<CreateArgs>();
    auto* create = token->add_subcommand(
        "create", "Create an API token (printed once) for yourself; admins: for anyone");
    create->add_option("--name", a->name, "what it is for, e.g. laptop");
    create->add_option("--user", a->user, "whose token (admins; default: you)")->type_name("USER");
    create->add_option("--expires-in", a->expires_in, "e.g. 30d, 12h (default: never)")
        ->type_name("DURATION");
    create->add_flag("--save", a->save,
                     "also write it to ~/.config/gpool/token (or --token-file), mode 0600");
    create->footer(kFooter);
    create->callback(reporting([global, a] { return runCreate(*global, *a); }));

    auto* list = token->add_subcommand(
        "list", "List your tokens (admins: every token, join tokens and node credentials too)");
    list->footer(kFooter);
    list->callback(reporting([global] { return runList(*global); }));

    auto id = std::make_shared<std::string>();
    auto* revoke =
        token->add_subcommand("revoke", "Revoke a token: requests with it are refused from now on");
    revoke->add_option("ID", *id, "the token's id (gpool token list)")->required();
    revoke->footer(kFooter);
    revoke->callback(reporting([global, id] { return runRevoke(*global, *id); }));
  }

  auto* join =
      app.add_subcommand("join-token", "Join tokens: how a new GPU server's agent gets in");
  join->require_subcommand(1);
  join->footer(kFooter);
  {
    auto a = std::make_shared<JoinArgs>();
    auto* create = join->add_subcommand(
        "create", "Create a join token (admins) and print the gpool-agent command that uses it");
    create->add_option("--name", a->name, "what it is for, e.g. rack-3");
    create->add_option("--expires-in", a->expires_in, "how long it admits nodes (default: 1h)")
        ->type_name("DURATION");
    create->add_flag("--reusable", a->reusable,
                     "admit any number of nodes until it expires (default: one)");
    create
        ->add_option("--node", a->node,
                     "admit this node only, even when it exists (a reinstalled server takes "
                     "over its name; the old credentials are revoked when it joins)")
        ->type_name("NAME");
    create->footer(kFooter);
    create->callback(reporting([global, a] { return runJoinCreate(*global, *a); }));
  }
}

}  // namespace gpool::cli
