#include "cli/admin_commands.h"

#include <grp.h>
#include <pwd.h>
#include <time.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/agent_config.h"
#include "api/json_reader.h"
#include "api/user.h"
#include "cli/api_client.h"
#include "cli/client_commands.h"
#include "cli/format.h"
#include "common/status.h"
#include "common/units.h"
#include "controller/controller_config.h"
#include "net/http.h"

namespace gpool::cli {

namespace {

using nlohmann::json;

const std::string kFooter =
    "Global options (before or after the command):\n"
    "  --socket PATH       the controller's Unix socket (default: $GPOOL_SOCKET, else "
    "/run/gpool/gpoold.sock)\n"
    "  --server HOST:PORT  its TLS listener instead, with an API token (default: "
    "$GPOOL_SERVER;\n"
    "                      --ca FILE, --token-file FILE: see `gpool token --help`)\n"
    "  --json              print JSON (the server's answer) instead of tables\n"
    "Exit codes: 0 ok, 2 bad arguments, 3 not found, 4 permission denied, 5 wrong state or "
    "already exists, 6 quota, 7 controller unreachable (docs/cli-exit-codes.md)\n";

constexpr std::string_view kAdminRole = "the admin role";
constexpr std::string_view kQuotaRole = "the admin role (or group-admin of that group)";

// gpoold's permission errors name the caller and the action; the CLI adds which command needs
// which role and what to do about it.
Status explainDenied(Status s, std::string_view command, std::string_view role) {
  // Unauthenticated (a refused API token) already says what to do about the token.
  if (s.code() != StatusCode::kPermissionDenied) return s;
  return Status(s.code(), "permission denied: `gpool " + std::string(command) + "` needs " +
                              std::string(role) + " (gpoold: " + s.message() +
                              "); ask an admin, or run it as root on the controller's server");
}

// Replaces the API's field paths in a message ("quota.max_gpus_milli: ...") by the flags that
// set them ("--max-gpus: ..."), so errors name what the user typed.
struct FieldFlag {
  std::string_view field;
  std::string_view flag;
};
Status withFlagNames(Status s, std::string_view prefix, const std::vector<FieldFlag>& fields) {
  if (s.isOk()) return s;
  std::string m = s.message();
  for (const FieldFlag& f : fields) {
    std::string path = std::string(prefix) + "." + std::string(f.field);
    size_t at = m.find(path);
    if (at == std::string::npos) continue;
    size_t end = at + path.size();
    // "quota.max_gpus" also matches inside "quota.max_gpus_milli": take the whole key.
    while (end < m.size() && (std::isalnum(static_cast<unsigned char>(m[end])) || m[end] == '_'))
      ++end;
    // "group.members[1]" names the flag's second value: "--member".
    if (end < m.size() && m[end] == '[') {
      size_t close = m.find(']', end);
      if (close != std::string::npos) end = close + 1;
    }
    m.replace(at, end - at, std::string(f.flag));
    break;
  }
  return Status(s.code(), m);
}

std::string pathName(const std::string& name) {
  return net::percentEncode(name);
}

// "1.5" for 1500 thousandths.
std::string gpuAmount(uint64_t milli) {
  std::string s = std::to_string(milli / 1000);
  uint64_t frac = milli % 1000;
  if (frac == 0) return s;
  char buf[8];
  std::snprintf(buf, sizeof buf, "%03llu", static_cast<unsigned long long>(frac));
  std::string f = buf;
  while (!f.empty() && f.back() == '0')
    f.pop_back();
  return s + "." + f;
}

std::string joined(const std::vector<std::string>& items, const std::string& none = "-") {
  if (items.empty()) return none;
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? "," : "") + items[i];
  return out;
}

std::vector<std::string> splitList(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    std::stringstream ss(item);
    std::string part;
    while (std::getline(ss, part, ',')) {
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

Result<uint32_t> parseUint32(const std::string& text, std::string_view flag) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    return Status::invalidArgument(std::string(flag) + ": '" + text +
                                   "' is not a non-negative integer");
  }
  return v;
}

Status validName(const std::string& name, std::string_view what, std::string_view arg) {
  Status s = api::validateAccountName(name, what);
  if (s.isOk()) return s;
  return Status::invalidArgument(std::string(arg) + ": " + s.message());
}

std::string utcTime(int64_t unix_us) {
  time_t t = static_cast<time_t>(unix_us / 1'000'000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// "Key: value" lines with the values aligned.
std::string formatFields(const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [k, v] : fields)
    width = std::max(width, k.size() + 1);
  std::string out;
  for (const auto& [k, v] : fields) {
    std::string key = k + ":";
    key.resize(width + 1, ' ');
    out += key + terminalSafe(v);
    while (!out.empty() && out.back() == ' ')
      out.pop_back();
    out += "\n";
  }
  return out;
}

// ---------------------------------------------------------------- quota formatting

std::string limitText(const std::optional<uint64_t>& v, std::string (*f)(uint64_t)) {
  return v ? f(*v) : "-";
}
std::string memText(uint64_t mib) {
  return formatMemoryMiB(mib);
}
// GPU-hours as given: "100", "0.5", "12.25" (at most 3 decimals shown).
std::string hoursLimitText(double h) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", h);
  std::string s = buf;
  while (s.back() == '0')
    s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// "max_gpus=4 gpu_hours=1000/30-00:00:00 ..." for one line of text.
std::string quotaSummary(const api::Quota& q) {
  std::vector<std::string> parts;
  if (q.max_gpus_milli) parts.push_back("max_gpus=" + gpuAmount(*q.max_gpus_milli));
  if (q.gpu_hours) {
    parts.push_back("gpu_hours=" + hoursLimitText(*q.gpu_hours) + "/" +
                    formatDuration(q.period_seconds));
  }
  if (q.max_memory_per_task_mib) {
    parts.push_back("max_gpu_mem=" + formatMemoryMiB(*q.max_memory_per_task_mib));
  }
  if (q.max_compute_milli) parts.push_back("max_compute=" + gpuAmount(*q.max_compute_milli));
  if (q.max_run_time_seconds) {
    parts.push_back("max_run_time=" + formatDuration(*q.max_run_time_seconds));
  }
  parts.push_back("priority_weight=" + std::to_string(q.priority_weight));
  if (q.guaranteed_gpus_milli) {
    parts.push_back("guaranteed_gpus=" + gpuAmount(q.guaranteed_gpus_milli));
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? " " : "") + parts[i];
  return out;
}

std::vector<std::string> quotaHeader() {
  return {"SUBJECT",     "NAME",        "MAX_GPUS",     "GPU_HOURS", "PERIOD",
          "MAX_GPU_MEM", "MAX_COMPUTE", "MAX_RUN_TIME", "WEIGHT",    "GUARANTEED"};
}
const std::vector<Align> kQuotaAlign = {Align::kLeft,  Align::kLeft,  Align::kRight, Align::kRight,
                                        Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                                        Align::kRight, Align::kRight};

std::vector<std::string> quotaRow(const std::string& subject, const std::string& name,
                                  const api::Quota& q) {
  return {subject,
          name,
          q.max_gpus_milli ? gpuAmount(*q.max_gpus_milli) : "-",
          q.gpu_hours ? hoursLimitText(*q.gpu_hours) : "-",
          formatDuration(q.period_seconds),
          limitText(q.max_memory_per_task_mib, memText),
          q.max_compute_milli ? gpuAmount(*q.max_compute_milli) : "-",
          q.max_run_time_seconds ? formatDuration(*q.max_run_time_seconds) : "-",
          std::to_string(q.priority_weight),
          gpuAmount(q.guaranteed_gpus_milli)};
}

Result<api::Quota> quotaFrom(const json& answer) {
  api::Quota q;
  if (!answer.contains("limits")) return Status::internal("gpoold's quota has no 'limits'");
  GPOOL_RETURN_IF_ERROR(api::fromJson(answer["limits"], &q, "gpoold's quota limits"));
  return q;
}

// ---------------------------------------------------------------- users

struct UserArgs {
  std::string name;
  std::string uid;
  std::vector<std::string> groups;  // add: the groups; set: replaces them
  std::vector<std::string> add_groups;
  std::vector<std::string> remove_groups;
  std::string role;
  std::string default_qos;
  bool default_qos_given = false;
};

Result<api::User> userFrom(const json& j) {
  api::User u;
  GPOOL_RETURN_IF_ERROR(api::fromJson(j, &u, "gpoold's user"));
  return u;
}

std::string formatUser(const api::User& u) {
  std::vector<std::pair<std::string, std::string>> f = {
      {"Name", u.name},
      {"Uid", std::to_string(u.uid)},
      {"Role", std::string(api::roleName(u.role))},
      {"Groups", joined(u.groups)},
      {"DefaultQoS", u.default_qos.empty() ? "(the pool's default)" : u.default_qos},
      {"Quota", u.quota ? quotaSummary(*u.quota) : "none (only the groups' quotas apply)"}};
  return formatFields(f);
}

Status runUserList(const GlobalOptions& global) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json answer, api.get("/v1/users"));
  if (global.json) {
    printJson(answer);
    return Status::ok();
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& j : answer.value("users", json::array())) {
    GPOOL_ASSIGN_OR_RETURN(api::User u, userFrom(j));
    rows.push_back({u.name, std::to_string(u.uid), std::string(api::roleName(u.role)),
                    joined(u.groups), u.default_qos.empty() ? "-" : u.default_qos});
  }
  if (rows.empty()) {
    std::cout << "No user records (a user without one is a plain user; add one with `gpool user "
                 "add NAME`)\n";
    return Status::ok();
  }
  std::cout << formatTable({"USER", "UID", "ROLE", "GROUPS", "DEFAULT_QOS"}, rows,
                           {Align::kLeft, Align::kRight});
  return Status::ok();
}

Result<json> getUser(ApiClient& api, const std::string& name) {
  Result<json> r = api.get("/v1/users/" + pathName(name));
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) {
    return Status::notFound("user '" + name + "' has no record (add it with `gpool user add " +
                            name + "`)");
  }
  return r;
}

Status runUserShow(const GlobalOptions& global, const std::string& name) {
  GPOOL_RETURN_IF_ERROR(validName(name, "user name", "USER"));
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json answer, getUser(api, name));
  if (global.json) {
    printJson(answer);
    return Status::ok();
  }
  GPOOL_ASSIGN_OR_RETURN(api::User u, userFrom(answer));
  std::cout << formatUser(u);
  return Status::ok();
}

const std::vector<FieldFlag> kUserFields = {
    {"uid", "--uid"}, {"groups", "--group"}, {"role", "--role"}, {"default_qos", "--default-qos"}};

Result<std::string> roleArg(const std::string& text) {
  Result<api::Role> role = api::parseRole(text);
  if (!role.ok()) {
    return Status::invalidArgument("--role: '" + text +
                                   "' is not a role (use user, group-admin or admin)");
  }
  return std::string(api::roleName(*role));
}

Status checkGroupNames(const std::vector<std::string>& groups, std::string_view flag) {
  for (const std::string& g : groups)
    GPOOL_RETURN_IF_ERROR(validName(g, "group name", flag));
  return Status::ok();
}

// Writes `user` (its record without the quota, which has its own route) and prints the result.
Status putUser(const GlobalOptions& global, ApiClient& api, json user, const std::string& verb,
               const std::string& command) {
  user.erase("quota");
  std::string name = user.value("name", "");
  Result<json> answer = api.put("/v1/users/" + pathName(name), user.dump());
  if (!answer.ok()) {
    return explainDenied(withFlagNames(answer.status(), "user", kUserFields), command, kAdminRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  GPOOL_ASSIGN_OR_RETURN(api::User u, userFrom(*answer));
  std::cout << verb << " user " << u.name << " (uid " << u.uid << ", role " << api::roleName(u.role)
            << ", groups " << joined(u.groups) << ")\n";
  return Status::ok();
}

Status runUserAdd(const GlobalOptions& global, const UserArgs& a) {
  GPOOL_RETURN_IF_ERROR(validName(a.name, "user name", "USER"));
  json user{{"name", a.name}};
  if (!a.uid.empty()) {
    GPOOL_ASSIGN_OR_RETURN(uint32_t uid, parseUint32(a.uid, "--uid"));
    user["uid"] = uid;
  } else {
    struct passwd* pw = getpwnam(a.name.c_str());
    if (!pw) {
      return Status::invalidArgument("--uid: there is no local account '" + a.name +
                                     "' to take the uid from; give --uid N (the user's uid on "
                                     "every server)");
    }
    user["uid"] = pw->pw_uid;
  }
  std::vector<std::string> groups = splitList(a.groups);
  GPOOL_RETURN_IF_ERROR(checkGroupNames(groups, "--group"));
  user["groups"] = groups;
  if (!a.role.empty()) {
    GPOOL_ASSIGN_OR_RETURN(std::string role, roleArg(a.role));
    user["role"] = role;
  }
  if (a.default_qos_given) user["default_qos"] = a.default_qos;
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> existing = api.get("/v1/users/" + pathName(a.name));
  if (existing.ok()) {
    return Status::alreadyExists("user '" + a.name + "' already exists (change it with `gpool " +
                                 "user set " + a.name + " ...`)");
  }
  if (existing.status().code() != StatusCode::kNotFound) {
    return explainDenied(existing.status(), "user add", kAdminRole);
  }
  return putUser(global, api, user, "Added", "user add");
}

Status runUserSet(const GlobalOptions& global, const UserArgs& a) {
  GPOOL_RETURN_IF_ERROR(validName(a.name, "user name", "USER"));
  if (a.uid.empty() && a.groups.empty() && a.add_groups.empty() && a.remove_groups.empty() &&
      a.role.empty() && !a.default_qos_given) {
    return Status::invalidArgument(
        "nothing to change: give --uid, --groups, --add-group, --remove-group, --role or "
        "--default-qos");
  }
  if (!a.groups.empty() && (!a.add_groups.empty() || !a.remove_groups.empty())) {
    return Status::invalidArgument(
        "--groups replaces every group: use it alone, or --add-group/--remove-group");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> got = getUser(api, a.name);
  if (!got.ok()) return explainDenied(got.status(), "user set", kAdminRole);
  json user = *got;
  if (!a.uid.empty()) {
    GPOOL_ASSIGN_OR_RETURN(uint32_t uid, parseUint32(a.uid, "--uid"));
    user["uid"] = uid;
  }
  std::vector<std::string> groups = user.value("groups", std::vector<std::string>{});
  if (!a.groups.empty()) groups = splitList(a.groups);
  for (const std::string& g : splitList(a.add_groups)) {
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  }
  for (const std::string& g : splitList(a.remove_groups)) {
    auto it = std::find(groups.begin(), groups.end(), g);
    if (it == groups.end()) {
      return Status::invalidArgument("--remove-group: user '" + a.name + "' is not in group '" + g +
                                     "' (their groups: " + joined(groups) + ")");
    }
    groups.erase(it);
  }
  GPOOL_RETURN_IF_ERROR(checkGroupNames(groups, "--groups"));
  user["groups"] = groups;
  if (!a.role.empty()) {
    GPOOL_ASSIGN_OR_RETURN(std::string role, roleArg(a.role));
    user["role"] = role;
  }
  if (a.default_qos_given) user["default_qos"] = a.default_qos;
  return putUser(global, api, user, "Changed", "user set");
}

// DELETE `target`; prints "Removed <what>" or the JSON answer.
Status removeThing(const GlobalOptions& global, const std::string& target, const std::string& what,
                   const std::string& command, std::string_view role) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.del(target);
  if (!answer.ok()) return explainDenied(answer.status(), command, role);
  if (global.json) {
    printJson(*answer);
  } else {
    std::cout << "Removed " << what << "\n";
  }
  return Status::ok();
}

Status runUserRemove(const GlobalOptions& global, const std::string& name) {
  GPOOL_RETURN_IF_ERROR(validName(name, "user name", "USER"));
  return removeThing(global, "/v1/users/" + pathName(name), "user " + name, "user remove",
                     kAdminRole);
}

// ---------------------------------------------------------------- groups

struct GroupArgs {
  std::string name;
  std::string gid;
  std::string project_dir;
  bool project_dir_given = false;
  std::vector<std::string> members;  // add: members; set: --add-member
  std::vector<std::string> admins;   // add: admins; set: --add-admin
  std::vector<std::string> remove_members;
  std::vector<std::string> remove_admins;
};

// The members and the group admins of each group, from the user records the caller can see.
struct Membership {
  std::map<std::string, std::vector<std::string>> members;
  std::map<std::string, std::vector<std::string>> admins;
};
Result<Membership> membership(ApiClient& api) {
  GPOOL_ASSIGN_OR_RETURN(json users, api.get("/v1/users"));
  Membership m;
  for (const json& j : users.value("users", json::array())) {
    GPOOL_ASSIGN_OR_RETURN(api::User u, userFrom(j));
    for (const std::string& g : u.groups) {
      m.members[g].push_back(u.name);
      if (u.role == api::Role::kGroupAdmin) m.admins[g].push_back(u.name);
    }
  }
  return m;
}

Result<api::Group> groupFrom(const json& j) {
  api::Group g;
  GPOOL_RETURN_IF_ERROR(api::fromJson(j, &g, "gpoold's group"));
  return g;
}

Status runGroupList(const GlobalOptions& global) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json answer, api.get("/v1/groups"));
  GPOOL_ASSIGN_OR_RETURN(Membership m, membership(api));
  if (global.json) {
    for (json& g : answer["groups"]) {
      std::string name = g.value("name", "");
      g["members"] = m.members[name];
      g["admins"] = m.admins[name];
    }
    printJson(answer);
    return Status::ok();
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& j : answer.value("groups", json::array())) {
    GPOOL_ASSIGN_OR_RETURN(api::Group g, groupFrom(j));
    rows.push_back({g.name, std::to_string(g.gid), g.project_dir.empty() ? "-" : g.project_dir,
                    joined(m.members[g.name]), joined(m.admins[g.name])});
  }
  if (rows.empty()) {
    std::cout << "No groups (add one with `gpool group add NAME`)\n";
    return Status::ok();
  }
  std::cout << formatTable({"GROUP", "GID", "PROJECT_DIR", "MEMBERS", "ADMINS"}, rows,
                           {Align::kLeft, Align::kRight});
  return Status::ok();
}

Result<json> getGroup(ApiClient& api, const std::string& name) {
  Result<json> r = api.get("/v1/groups/" + pathName(name));
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) {
    return Status::notFound("group '" + name + "' does not exist (add it with `gpool group add " +
                            name + "`)");
  }
  return r;
}

Status runGroupShow(const GlobalOptions& global, const std::string& name) {
  GPOOL_RETURN_IF_ERROR(validName(name, "group name", "GROUP"));
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json answer, getGroup(api, name));
  GPOOL_ASSIGN_OR_RETURN(Membership m, membership(api));
  if (global.json) {
    answer["members"] = m.members[name];
    answer["admins"] = m.admins[name];
    printJson(answer);
    return Status::ok();
  }
  GPOOL_ASSIGN_OR_RETURN(api::Group g, groupFrom(answer));
  std::cout << formatFields({{"Name", g.name},
                             {"Gid", std::to_string(g.gid)},
                             {"ProjectDir", g.project_dir.empty() ? "-" : g.project_dir},
                             {"Members", joined(m.members[name])},
                             {"Admins", joined(m.admins[name])},
                             {"Quota", g.quota ? quotaSummary(*g.quota) : "none"}});
  return Status::ok();
}

const std::vector<FieldFlag> kGroupFields = {{"gid", "--gid"},
                                             {"project_dir", "--project-dir"},
                                             {"members", "--member"},
                                             {"admins", "--admin"},
                                             {"add_members", "--add-member"},
                                             {"add_admins", "--add-admin"},
                                             {"remove_members", "--remove-member"},
                                             {"remove_admins", "--remove-admin"}};

Status printGroupResult(const GlobalOptions& global, ApiClient& api, const std::string& name,
                        const std::string& verb) {
  GPOOL_ASSIGN_OR_RETURN(json answer, getGroup(api, name));
  GPOOL_ASSIGN_OR_RETURN(Membership m, membership(api));
  if (global.json) {
    answer["members"] = m.members[name];
    answer["admins"] = m.admins[name];
    printJson(answer);
    return Status::ok();
  }
  GPOOL_ASSIGN_OR_RETURN(api::Group g, groupFrom(answer));
  std::cout << verb << " group " << g.name << " (gid " << g.gid << ", members "
            << joined(m.members[name]) << ", admins " << joined(m.admins[name]) << ")\n";
  return Status::ok();
}

// The body of a membership change: the lists the flags gave, under `keys` (POST's "members",
// "admins"; PATCH's "add_members", ...).
void putMembers(json* body, const GroupArgs& a, bool create) {
  auto put = [&](const char* key, const std::vector<std::string>& flags) {
    std::vector<std::string> names = splitList(flags);
    if (!names.empty()) (*body)[key] = names;
  };
  put(create ? "members" : "add_members", a.members);
  put(create ? "admins" : "add_admins", a.admins);
  if (!create) {
    put("remove_admins", a.remove_admins);
    put("remove_members", a.remove_members);
  }
}

// The group and its members are one request, applied by gpoold in one transaction: a bad
// member leaves no group behind.
Status runGroupAdd(const GlobalOptions& global, const GroupArgs& a) {
  GPOOL_RETURN_IF_ERROR(validName(a.name, "group name", "GROUP"));
  json group{{"name", a.name}};
  if (!a.gid.empty()) {
    GPOOL_ASSIGN_OR_RETURN(uint32_t gid, parseUint32(a.gid, "--gid"));
    group["gid"] = gid;
  } else {
    struct group* gr = getgrnam(a.name.c_str());
    if (!gr) {
      return Status::invalidArgument("--gid: there is no local group '" + a.name +
                                     "' to take the gid from; give --gid N (the group's gid on "
                                     "every server)");
    }
    group["gid"] = gr->gr_gid;
  }
  if (a.project_dir_given) group["project_dir"] = a.project_dir;
  putMembers(&group, a, /*create=*/true);
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> made = api.post("/v1/groups", group.dump());
  if (!made.ok()) {
    if (made.status().code() == StatusCode::kAlreadyExists) {
      return Status::alreadyExists("group '" + a.name + "' already exists (change it with " +
                                   "`gpool group set " + a.name + " ...`)");
    }
    return explainDenied(withFlagNames(made.status(), "group", kGroupFields), "group add",
                         kAdminRole);
  }
  return printGroupResult(global, api, a.name, "Added");
}

Status runGroupSet(const GlobalOptions& global, const GroupArgs& a) {
  GPOOL_RETURN_IF_ERROR(validName(a.name, "group name", "GROUP"));
  if (a.gid.empty() && !a.project_dir_given && a.members.empty() && a.admins.empty() &&
      a.remove_members.empty() && a.remove_admins.empty()) {
    return Status::invalidArgument(
        "nothing to change: give --gid, --project-dir, --add-member, --remove-member, "
        "--add-admin or --remove-admin");
  }
  json change = json::object();
  if (!a.gid.empty()) {
    GPOOL_ASSIGN_OR_RETURN(uint32_t gid, parseUint32(a.gid, "--gid"));
    change["gid"] = gid;
  }
  if (a.project_dir_given) change["project_dir"] = a.project_dir;
  putMembers(&change, a, /*create=*/false);
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> changed =
      api.call(net::Method::kPatch, "/v1/groups/" + pathName(a.name), change.dump());
  if (!changed.ok()) {
    if (changed.status().code() == StatusCode::kNotFound &&
        changed.status().message().find("group '" + a.name + "'") != std::string::npos) {
      return Status::notFound("group '" + a.name + "' does not exist (add it with `gpool group " +
                              "add " + a.name + "`)");
    }
    return explainDenied(withFlagNames(changed.status(), "group", kGroupFields), "group set",
                         kAdminRole);
  }
  return printGroupResult(global, api, a.name, "Changed");
}

// gpoold deletes the group and takes it out of its members' records in one transaction.
Status runGroupRemove(const GlobalOptions& global, const std::string& name) {
  GPOOL_RETURN_IF_ERROR(validName(name, "group name", "GROUP"));
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(Membership m, membership(api));
  Result<json> answer = api.del("/v1/groups/" + pathName(name));
  if (!answer.ok()) return explainDenied(answer.status(), "group remove", kAdminRole);
  if (global.json) {
    (*answer)["members_removed"] = m.members[name];
    printJson(*answer);
  } else {
    std::cout << "Removed group " << name << " (and it from the groups of "
              << joined(m.members[name], "no user") << ")\n";
  }
  return Status::ok();
}

// ---------------------------------------------------------------- quotas

struct QuotaArgs {
  std::string user;
  std::string group;
  bool mine = false;
  // Limit flags given to `quota set`, by the API's field name.
  std::map<std::string, std::string> limits;
};

struct LimitFlag {
  const char* flag;       // without "--"
  const char* field;      // the API's shorthand key
  const char* canonical;  // the key gpoold answers with
  const char* help;
  bool integer;    // sent as a JSON integer
  bool clearable;  // "none" removes the limit
};
const std::vector<LimitFlag>& limitFlags() {
  static const std::vector<LimitFlag> flags = {
      {"max-gpus", "max_gpus", "max_gpus_milli",
       "GPUs held at once, slices counted (4, 1.5; none: no limit)", false, true},
      {"gpu-hours", "gpu_hours", "gpu_hours", "GPU-hours per period (100, 0.5; none: no limit)",
       false, true},
      {"period", "gpu_hours_period", "gpu_hours_period_seconds",
       "the GPU-hour period (30d, 7d; default 30 days)", false, false},
      {"max-gpu-mem", "max_memory_per_task", "max_memory_per_task_mib",
       "GPU memory per task (40G; none: no limit)", false, true},
      {"max-compute", "max_compute", "max_compute_milli",
       "compute shares held at once, in GPUs (2.5; none: no limit)", false, true},
      {"max-run-time", "max_run_time", "max_run_time_seconds",
       "longest run of one job (2d, 12h; none: no limit)", false, true},
      {"priority-weight", "priority_weight", "priority_weight",
       "fair-share weight, 0 to 1000000 (default 1)", true, false},
      {"guaranteed-gpus", "guaranteed_gpus", "guaranteed_gpus_milli",
       "GPUs guaranteed (others may borrow them; default 0)", false, false},
  };
  return flags;
}

std::vector<FieldFlag> quotaFields() {
  // The flags with their "--", built once and kept alive for the string_views.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const LimitFlag& f : limitFlags())
      n.push_back(std::string("--") + f.flag);
    return n;
  }();
  std::vector<FieldFlag> out;
  for (size_t i = 0; i < names.size(); ++i)
    out.push_back({limitFlags()[i].field, names[i]});
  return out;
}

// The subject of a quota command: exactly one of --user and --group.
Result<std::pair<std::string, std::string>> quotaSubject(const QuotaArgs& a) {
  if (a.user.empty() == a.group.empty()) {
    return Status::invalidArgument("whose quota? give exactly one of --user NAME and --group NAME");
  }
  if (!a.user.empty()) {
    GPOOL_RETURN_IF_ERROR(validName(a.user, "user name", "--user"));
    return std::make_pair(std::string("user"), a.user);
  }
  GPOOL_RETURN_IF_ERROR(validName(a.group, "group name", "--group"));
  return std::make_pair(std::string("group"), a.group);
}

Status runQuotaList(const GlobalOptions& global, const QuotaArgs& a) {
  if (!a.user.empty() && !a.group.empty()) {
    return Status::invalidArgument("give at most one of --user and --group");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json answer, api.get("/v1/quotas"));
  json kept = json::array();
  for (const json& q : answer.value("quotas", json::array())) {
    std::string subject = q.value("subject", "");
    std::string name = q.value("name", "");
    if (!a.user.empty() && (subject != "user" || name != a.user)) continue;
    if (!a.group.empty() && (subject != "group" || name != a.group)) continue;
    kept.push_back(q);
  }
  if (global.json) {
    printJson(json{{"quotas", kept}});
    return Status::ok();
  }
  if (kept.empty()) {
    std::cout << "No quotas (set one with `gpool quota set --user NAME --max-gpus N`)\n";
    return Status::ok();
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& q : kept) {
    GPOOL_ASSIGN_OR_RETURN(api::Quota limits, quotaFrom(q));
    rows.push_back(quotaRow(q.value("subject", ""), q.value("name", ""), limits));
  }
  std::cout << formatTable(quotaHeader(), rows, kQuotaAlign);
  return Status::ok();
}

Status runQuotaShow(const GlobalOptions& global, const QuotaArgs& a) {
  GPOOL_ASSIGN_OR_RETURN(auto subject, quotaSubject(a));
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.get("/v1/quotas/" + subject.first + "/" + pathName(subject.second));
  if (!answer.ok() && answer.status().code() == StatusCode::kNotFound) {
    return Status::notFound(subject.first + " '" + subject.second +
                            "' has no quota (set one with `gpool quota set --" + subject.first +
                            " " + subject.second + " ...`)");
  }
  if (!answer.ok()) return explainDenied(answer.status(), "quota show", kQuotaRole);
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  GPOOL_ASSIGN_OR_RETURN(api::Quota limits, quotaFrom(*answer));
  std::cout << formatTable(quotaHeader(), {quotaRow(subject.first, subject.second, limits)},
                           kQuotaAlign);
  return Status::ok();
}

Status runQuotaSet(const GlobalOptions& global, const QuotaArgs& a) {
  GPOOL_ASSIGN_OR_RETURN(auto subject, quotaSubject(a));
  if (a.limits.empty()) {
    std::string names;
    for (const LimitFlag& f : limitFlags())
      names += std::string(names.empty() ? "" : ", ") + "--" + f.flag;
    return Status::invalidArgument("nothing to set: give one or more of " + names);
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  std::string target = "/v1/quotas/" + subject.first + "/" + pathName(subject.second);
  // Flags change the limits they name; the others keep their values.
  json limits = json::object();
  Result<json> existing = api.get(target);
  if (existing.ok()) {
    limits = existing->value("limits", json::object());
  } else if (existing.status().code() != StatusCode::kNotFound) {
    return explainDenied(existing.status(), "quota set", kQuotaRole);
  }
  for (const LimitFlag& f : limitFlags()) {
    auto it = a.limits.find(f.field);
    if (it == a.limits.end()) continue;
    limits.erase(f.canonical);
    limits.erase(f.field);
    if (it->second == "none") {
      if (!f.clearable) {
        return Status::invalidArgument(std::string("--") + f.flag +
                                       ": 'none' is not allowed here (give a value)");
      }
      continue;
    }
    if (std::string_view(f.field) == "gpu_hours") {
      // Fractions of a GPU-hour are fine (a small lab's 0.5); sent as a JSON number.
      Result<uint64_t> milli =
          parseScaledDecimal(it->second, 3, uint64_t{1'000'000'000'000}, "GPU-hours");
      if (!milli.ok()) {
        return Status::invalidArgument("--gpu-hours: '" + it->second +
                                       "' is not a number of GPU-hours (e.g. 100 or 0.5, at most "
                                       "3 decimals; or none)");
      }
      limits[f.field] = static_cast<double>(*milli) / 1000.0;
    } else if (f.integer) {
      uint64_t v = 0;
      const std::string& t = it->second;
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (t.empty() || ec != std::errc() || p != t.data() + t.size()) {
        return Status::invalidArgument(std::string("--") + f.flag + ": '" + t +
                                       "' is not a non-negative integer" +
                                       (f.clearable ? " (or none)" : ""));
      }
      limits[f.field] = v;
    } else {
      limits[f.field] = it->second;
    }
  }
  Result<json> answer = api.put(target, limits.dump());
  if (!answer.ok() && answer.status().code() == StatusCode::kNotFound) {
    return Status::notFound(subject.first + " '" + subject.second + "' does not exist: add it " +
                            "first (`gpool " + subject.first + " add " + subject.second + "`)");
  }
  if (!answer.ok()) {
    return explainDenied(withFlagNames(answer.status(), "quota", quotaFields()), "quota set",
                         kQuotaRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  GPOOL_ASSIGN_OR_RETURN(api::Quota q, quotaFrom(*answer));
  std::cout << "Set the quota of " << subject.first << " " << subject.second << ": "
            << quotaSummary(q) << "\n";
  return Status::ok();
}

Status runQuotaRemove(const GlobalOptions& global, const QuotaArgs& a) {
  GPOOL_ASSIGN_OR_RETURN(auto subject, quotaSubject(a));
  return removeThing(global, "/v1/quotas/" + subject.first + "/" + pathName(subject.second),
                     "the quota of " + subject.first + " " + subject.second, "quota remove",
                     kQuotaRole);
}

// ---------------------------------------------------------------- QoS

struct QosArgs {
  std::string name;
  std::map<std::string, std::string> values;  // by API field
  bool preemptible = false;
  bool no_preemptible = false;
};

struct QosFlag {
  const char* flag;
  const char* field;
  const char* canonical;
  const char* help;
  bool integer;
  bool clearable;
};
const std::vector<QosFlag>& qosFlags() {
  static const std::vector<QosFlag> flags = {
      {"priority", "priority", "priority", "higher goes first, 0 to 1000000", true, false},
      {"description", "description", "description", "what the level is for", false, false},
      {"max-gpus-per-user", "max_gpus_per_user", "max_gpus_per_user_milli",
       "GPUs one user may hold in this QoS (none: no limit)", false, true},
      {"max-wall-time", "max_wall_time", "max_wall_time_seconds",
       "longest time limit, also the default (2d; none: no limit)", false, true},
      {"grace-time", "grace_time", "grace_time_seconds",
       "between the preemption signal and the kill (60s)", false, false},
  };
  return flags;
}

std::vector<FieldFlag> qosFields() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const QosFlag& f : qosFlags())
      n.push_back(std::string("--") + f.flag);
    return n;
  }();
  std::vector<FieldFlag> out;
  for (size_t i = 0; i < qosFlags().size(); ++i)
    out.push_back({qosFlags()[i].field, names[i]});
  out.push_back({"preemptible", "--preemptible"});
  out.push_back({"name", "QOS"});
  return out;
}

Result<json> qosList(ApiClient& api) {
  return api.get("/v1/qos");
}

Status runQosList(const GlobalOptions& global) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json answer, qosList(api));
  if (global.json) {
    printJson(answer);
    return Status::ok();
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& j : answer.value("qos", json::array())) {
    api::Qos q;
    GPOOL_RETURN_IF_ERROR(api::fromJson(j, &q, "gpoold's qos"));
    rows.push_back({q.name, std::to_string(q.priority), q.preemptible ? "yes" : "no",
                    q.max_gpus_per_user_milli ? gpuAmount(*q.max_gpus_per_user_milli) : "-",
                    q.max_wall_time_seconds ? formatDuration(*q.max_wall_time_seconds) : "-",
                    formatDuration(q.grace_time_seconds),
                    q.description.empty() ? "-" : q.description});
  }
  if (rows.empty()) {
    std::cout << "No QoS levels (add one with `gpool qos add NAME --priority N`)\n";
    return Status::ok();
  }
  std::cout << formatTable(
      {"QOS", "PRIORITY", "PREEMPTIBLE", "MAX_GPUS/USER", "MAX_WALL", "GRACE", "DESCRIPTION"}, rows,
      {Align::kLeft, Align::kRight, Align::kLeft, Align::kRight, Align::kRight, Align::kRight});
  return Status::ok();
}

Status runQosWrite(const GlobalOptions& global, const QosArgs& a, bool add) {
  const std::string command = add ? "qos add" : "qos set";
  if (a.name.empty()) return Status::invalidArgument("QOS: give the QoS level's name");
  if (a.preemptible && a.no_preemptible) {
    return Status::invalidArgument("--preemptible and --no-preemptible exclude each other");
  }
  if (!add && a.values.empty() && !a.preemptible && !a.no_preemptible) {
    return Status::invalidArgument(
        "nothing to change: give --priority, --description, --preemptible, --no-preemptible, "
        "--max-gpus-per-user, --max-wall-time or --grace-time");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json all, qosList(api));
  json qos;
  for (const json& q : all.value("qos", json::array())) {
    if (q.value("name", "") == a.name) qos = q;
  }
  if (add && !qos.is_null()) {
    return Status::alreadyExists("QoS '" + a.name + "' already exists (change it with `gpool qos " +
                                 "set " + a.name + " ...`)");
  }
  if (!add && qos.is_null()) {
    return Status::notFound("QoS '" + a.name + "' does not exist (add it with `gpool qos add " +
                            a.name + " ...`)");
  }
  if (add) qos = json{{"name", a.name}};
  for (const QosFlag& f : qosFlags()) {
    auto it = a.values.find(f.field);
    if (it == a.values.end()) continue;
    qos.erase(f.canonical);
    qos.erase(f.field);
    if (it->second == "none") {
      if (!f.clearable) {
        return Status::invalidArgument(std::string("--") + f.flag +
                                       ": 'none' is not allowed here (give a value)");
      }
      continue;
    }
    if (f.integer) {
      GPOOL_ASSIGN_OR_RETURN(uint32_t v, parseUint32(it->second, std::string("--") + f.flag));
      qos[f.field] = v;
    } else {
      qos[f.field] = it->second;
    }
  }
  if (a.preemptible) qos["preemptible"] = true;
  if (a.no_preemptible) qos["preemptible"] = false;
  Result<json> answer = api.put("/v1/qos/" + pathName(a.name), qos.dump());
  if (!answer.ok()) {
    return explainDenied(withFlagNames(answer.status(), "qos", qosFields()), command, kAdminRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::cout << (add ? "Added" : "Changed") << " QoS " << a.name << "\n";
  return Status::ok();
}

Status runQosRemove(const GlobalOptions& global, const std::string& name) {
  if (name.empty()) return Status::invalidArgument("QOS: give the QoS level's name");
  return removeThing(global, "/v1/qos/" + pathName(name), "QoS " + name, "qos remove", kAdminRole);
}

// ---------------------------------------------------------------- alerts

// "2026-12-07 03:51" in local time, or "-" for null.
std::string alertTime(const json& us) {
  if (!us.is_number_integer()) return "-";
  std::time_t secs = static_cast<std::time_t>(us.get<int64_t>() / 1'000'000);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string alertWhere(const json& labels) {
  std::string where;
  for (const char* key : {"Hostname", "gpu", "hpc_job", "pid", "reason"}) {
    if (!labels.contains(key) || labels[key].get<std::string>().empty()) continue;
    std::string v = labels[key].get<std::string>();
    if (std::string(key) == "gpu") {
      where += "/GPU " + v;
    } else if (std::string(key) == "hpc_job") {
      where += (where.empty() ? "" : " ") + std::string("job ") + v;
    } else if (std::string(key) == "pid") {
      where += " pid " + v;
    } else {
      where += (where.empty() ? "" : " ") + v;
    }
  }
  return where.empty() ? "pool" : where;
}

Status runAlertsList(const GlobalOptions& global, bool all, int64_t limit) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  std::string target = std::string("/v1/alerts?state=") + (all ? "all" : "firing") +
                       "&limit=" + std::to_string(limit);
  GPOOL_ASSIGN_OR_RETURN(json answer, api.get(target));
  if (global.json) {
    printJson(answer);
    return Status::ok();
  }
  const json& alerts = answer["alerts"];
  if (alerts.empty()) {
    std::cout << (all ? "No alerts.\n" : "No alert is firing (gpool alerts --all: history).\n");
    return Status::ok();
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& a : alerts) {
    std::string acked = a["acked_by"].is_string() ? a["acked_by"].get<std::string>() : "-";
    rows.push_back({std::to_string(a.value("id", int64_t{0})), a.value("state", ""),
                    a.value("severity", ""), a.value("alertname", ""), alertWhere(a["labels"]),
                    alertTime(a["started_us"]), alertTime(a["resolved_us"]), acked,
                    a.value("summary", "")});
  }
  std::cout << formatTable(
      {"ID", "STATE", "SEVERITY", "ALERT", "WHERE", "SINCE", "RESOLVED", "ACKED", "SUMMARY"}, rows,
      {Align::kRight});
  if (answer["next_before"].is_number_integer()) {
    std::cout << "(more: gpool alerts --all --limit N)\n";
  }
  return Status::ok();
}

Status runAlertsShow(const GlobalOptions& global, int64_t id) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.get("/v1/alerts/" + std::to_string(id));
  if (!answer.ok()) return explainDenied(answer.status(), "alerts show", "the admin role");
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  const json& a = *answer;
  std::cout << "Alert " << a.value("id", int64_t{0}) << ": " << a.value("alertname", "") << " ("
            << a.value("severity", "") << ", " << a.value("state", "") << ")\n"
            << "  " << a.value("summary", "") << "\n";
  for (const auto& [k, v] : a["labels"].items()) {
    if (k != "alertname" && k != "severity")
      std::cout << "  " << k << "=" << v.get<std::string>() << "\n";
  }
  for (const json& e : a["events"]) {
    std::cout << "  " << alertTime(e["time_us"]) << "  " << e.value("event", "") << " by "
              << e.value("actor", "")
              << (e.value("detail", "").empty() ? "" : ": " + e.value("detail", "")) << "\n";
  }
  return Status::ok();
}

Status runAlertsAck(const GlobalOptions& global, int64_t id) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.post("/v1/alerts/" + std::to_string(id) + "/ack", "");
  if (!answer.ok()) {
    Status s = answer.status();
    if (s.code() == StatusCode::kNotFound) {
      return Status::notFound("alert " + std::to_string(id) +
                              " does not exist (gpool alerts --all)");
    }
    return explainDenied(s, "alerts ack", kAdminRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::cout << "Alert " << id << " (" << answer->value("alertname", "") << ") acknowledged; it "
            << (answer->value("state", "") == "firing" ? "keeps firing until its condition clears"
                                                       : "is resolved")
            << "\n";
  return Status::ok();
}

Status runGpuClear(const GlobalOptions& global, const std::string& target) {
  size_t slash = target.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == target.size()) {
    return Status::invalidArgument(
        "NODE/GPU: expected a node and a GPU index, e.g. gpu-01/3, got '" + target + "'");
  }
  std::string node = target.substr(0, slash);
  std::string index = target.substr(slash + 1);
  if (index.find_first_not_of("0123456789") != std::string::npos) {
    return Status::invalidArgument("NODE/GPU: '" + index + "' is not a GPU index (gpool nodes)");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.post("/v1/nodes/" + pathName(node) + "/gpus/" + index + "/clear", "");
  if (!answer.ok()) return explainDenied(answer.status(), "gpu clear", kAdminRole);
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::string health = "?";
  for (const json& g : (*answer)["gpus"]) {
    if (std::to_string(g.value("index", -1)) == index) health = g.value("health", "?");
  }
  std::cout << "GPU " << index << " of " << node << " is no longer held; it is " << health
            << " (as its agent reports it)\n";
  return Status::ok();
}

// ---------------------------------------------------------------- drain / resume

Status runDrain(const GlobalOptions& global, const std::string& node, const std::string& reason) {
  if (reason.find_first_not_of(" \t") == std::string::npos) {
    return Status::invalidArgument("--reason: say why the node is drained (gpool drain " + node +
                                   " --reason \"disk replacement\"); it shows in `gpool nodes`");
  }
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer =
      api.post("/v1/nodes/" + pathName(node) + "/drain", json{{"reason", reason}}.dump());
  if (!answer.ok()) {
    Status s = answer.status();
    if (s.code() == StatusCode::kNotFound) {
      return Status::notFound("node '" + node + "' is not registered (see `gpool nodes`)");
    }
    return explainDenied(withFlagNames(s, "body", {{"reason", "--reason"}}), "drain", kAdminRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::cout << "Node " << node << " " << answer->value("state", "?") << " (" << reason
            << "): running jobs finish, nothing new starts there; `gpool resume " << node
            << "` ends it\n";
  return Status::ok();
}

Status runResume(const GlobalOptions& global, const std::string& node) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.post("/v1/nodes/" + pathName(node) + "/resume", "");
  if (!answer.ok()) {
    Status s = answer.status();
    if (s.code() == StatusCode::kNotFound) {
      return Status::notFound("node '" + node + "' is not registered (see `gpool nodes`)");
    }
    return explainDenied(s, "resume", kAdminRole);
  }
  if (global.json) {
    printJson(*answer);
    return Status::ok();
  }
  std::cout << "Node " << node << " " << answer->value("state", "?") << "\n";
  return Status::ok();
}

// An admin takes a server out of the pool: its record, its GPUs (their UUIDs are free for
// another node again) and its agent's credentials, in one transaction.
Status runNodeRemove(const GlobalOptions& global, const std::string& node) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> answer = api.del("/v1/nodes/" + pathName(node));
  if (!answer.ok()) return explainDenied(answer.status(), "node remove", kAdminRole);
  if (global.json) {
    printJson(*answer);
  } else {
    std::cout << "Removed node " << node
              << " (its GPUs and its agent's credentials; an agent joins again with a new join "
                 "token)\n";
  }
  return Status::ok();
}

// ---------------------------------------------------------------- usage

struct UsageArgs {
  std::string by = "user";
  std::string from;
  std::string to;
  bool csv = false;
  bool mine = false;
};

// One CSV field (RFC 4180): quoted when it holds a comma, a quote, CR or LF; quotes doubled.
std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string hoursText(double h) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", h);
  return buf;
}

Result<json> accountOf(ApiClient& api) {
  return api.get("/v1/account");
}

Status runUsage(const GlobalOptions& global, const UsageArgs& a) {
  if (a.by != "user" && a.by != "group") {
    return Status::invalidArgument("--by: '" + a.by + "' is not one of user, group");
  }
  if (a.csv && global.json) return Status::invalidArgument("--csv and --json exclude each other");
  std::string query = "?by=" + a.by;
  if (!a.from.empty()) query += "&from=" + net::percentEncode(a.from);
  if (!a.to.empty()) query += "&to=" + net::percentEncode(a.to);
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  Result<json> got = api.get("/v1/usage" + query);
  if (!got.ok()) {
    Status s = got.status();
    if (s.code() == StatusCode::kInvalidArgument) {
      std::string m = s.message();
      if (m.rfind("from:", 0) == 0 || m.rfind("to:", 0) == 0) m = "--" + m;
      return Status::invalidArgument(m);
    }
    return s;
  }
  json answer = *got;
  json account;
  if (a.mine) {
    GPOOL_ASSIGN_OR_RETURN(account, accountOf(api));
    std::set<std::string> mine;
    if (a.by == "user") {
      mine.insert(account.value("user", ""));
    } else {
      for (const json& g : account.value("groups", json::array()))
        mine.insert(g.get<std::string>());
    }
    json kept = json::array();
    for (const json& row : answer["rows"]) {
      if (mine.count(row.value("key", ""))) kept.push_back(row);
    }
    answer["rows"] = kept;
  }
  if (global.json) {
    if (a.mine) answer["fair_share"] = account.value("fair_share", json());
    printJson(answer);
    return Status::ok();
  }
  std::string from = utcTime(answer.value("from_us", int64_t{0}));
  std::string to = utcTime(answer.value("to_us", int64_t{0}));
  if (a.csv) {
    std::cout << a.by << ",gpu_hours,jobs,from,to\r\n";
    for (const json& row : answer["rows"]) {
      char hours[64];
      std::snprintf(hours, sizeof hours, "%.6f", row.value("gpu_hours", 0.0));
      std::cout << csvField(row.value("key", "")) << "," << hours << ","
                << row.value("jobs", int64_t{0}) << "," << csvField(from + "Z") << ","
                << csvField(to + "Z") << "\r\n";
    }
    return Status::ok();
  }
  std::cout << "GPU-hours by " << a.by << " (slices counted by their share), " << from << " to "
            << to << " UTC\n";
  std::vector<std::vector<std::string>> rows;
  double total = 0;
  int64_t jobs = 0;
  for (const json& row : answer["rows"]) {
    double h = row.value("gpu_hours", 0.0);
    int64_t n = row.value("jobs", int64_t{0});
    total += h;
    jobs += n;
    rows.push_back({row.value("key", ""), hoursText(h), std::to_string(n)});
  }
  if (rows.empty()) {
    std::cout << "No GPU use in this period\n";
  } else {
    if (rows.size() > 1) rows.push_back({"TOTAL", hoursText(total), std::to_string(jobs)});
    std::string upper = a.by == "user" ? "USER" : "GROUP";
    std::cout << formatTable({upper, "GPU-HOURS", "JOBS"}, rows,
                             {Align::kLeft, Align::kRight, Align::kRight});
  }
  if (a.mine && account.contains("fair_share") && account["fair_share"].is_object()) {
    const json& fs = account["fair_share"];
    std::cout << "Fair share: decayed usage " << hoursText(fs.value("user_gpu_hours", 0.0))
              << " GPU-hours (half-life "
              << formatDuration(fs.value("half_life_seconds", int64_t{0})) << ")\n";
  }
  return Status::ok();
}

// ---------------------------------------------------------------- account

std::string usedOf(const json& used, const api::Quota& q) {
  std::vector<std::string> parts;
  if (used.is_object()) {
    parts.push_back("gpus " + used.value("gpus", std::string("0")) +
                    (q.max_gpus_milli ? "/" + gpuAmount(*q.max_gpus_milli) : ""));
    parts.push_back("gpu_hours " + hoursText(used.value("gpu_hours", 0.0)) +
                    (q.gpu_hours ? "/" + hoursLimitText(*q.gpu_hours) : "") + " in the last " +
                    formatDuration(q.period_seconds));
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? ", " : "") + parts[i];
  return out;
}

Status printQuotas(const json& account) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::vector<std::string>> use;
  for (const json& q : account.value("quotas", json::array())) {
    GPOOL_ASSIGN_OR_RETURN(api::Quota limits, quotaFrom(q));
    rows.push_back(quotaRow(q.value("subject", ""), q.value("name", ""), limits));
    const json& used = q.contains("used") ? q["used"] : json();
    use.push_back({q.value("subject", ""), q.value("name", ""),
                   used.value("gpus", std::string("0")) +
                       (limits.max_gpus_milli ? "/" + gpuAmount(*limits.max_gpus_milli) : ""),
                   hoursText(used.value("gpu_hours", 0.0)) +
                       (limits.gpu_hours ? "/" + hoursLimitText(*limits.gpu_hours) : "")});
  }
  if (rows.empty()) {
    std::cout << "No quota applies to you: no limits beyond the pool's capacity and QoS\n";
    return Status::ok();
  }
  std::cout << formatTable(quotaHeader(), rows, kQuotaAlign) << "\n";
  std::cout << formatTable({"SUBJECT", "NAME", "GPUS(now/max)", "GPU_HOURS(period/max)"}, use,
                           {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight});
  return Status::ok();
}

Status runAccount(const GlobalOptions& global, bool quota_only) {
  GPOOL_ASSIGN_OR_RETURN(ApiClient api, ApiClient::connect(global));
  GPOOL_ASSIGN_OR_RETURN(json account, accountOf(api));
  if (global.json) {
    printJson(quota_only ? json{{"user", account.value("user", "")},
                                {"quotas", account.value("quotas", json::array())}}
                         : account);
    return Status::ok();
  }
  if (quota_only) return printQuotas(account);
  std::vector<std::string> groups, admin_of;
  for (const json& g : account.value("groups", json::array()))
    groups.push_back(g.get<std::string>());
  for (const json& g : account.value("admin_groups", json::array()))
    admin_of.push_back(g.get<std::string>());
  const json& now = account.contains("use") ? account["use"] : json();
  std::vector<std::pair<std::string, std::string>> f = {
      {"User", account.value("user", "") + " (uid " +
                   std::to_string(account.value("uid", int64_t{0})) + ")"},
      {"Role", account.value("role", "user") +
                   (account.value("has_record", false) ? "" : " (no user record)")},
      {"Groups", joined(groups)},
      {"GroupAdminOf", joined(admin_of)},
      {"DefaultQoS", account.value("default_qos", std::string()).empty()
                         ? "(the pool's default)"
                         : account.value("default_qos", std::string())},
      {"Jobs", std::to_string(now.value("running_jobs", int64_t{0})) + " running, " +
                   std::to_string(now.value("pending_jobs", int64_t{0})) + " pending"},
      {"GPUsHeld", now.value("gpus", std::string("0"))},
  };
  for (const json& q : account.value("quotas", json::array())) {
    GPOOL_ASSIGN_OR_RETURN(api::Quota limits, quotaFrom(q));
    f.push_back({"Quota(" + q.value("subject", "") + " " + q.value("name", "") + ")",
                 quotaSummary(limits)});
    f.push_back({"Used(" + q.value("subject", "") + " " + q.value("name", "") + ")",
                 usedOf(q.contains("used") ? q["used"] : json(), limits)});
  }
  if (account.value("quotas", json::array()).empty()) f.push_back({"Quota", "none"});
  if (account.contains("fair_share") && account["fair_share"].is_object()) {
    const json& fs = account["fair_share"];
    f.push_back({"FairShare", "decayed usage " + hoursText(fs.value("user_gpu_hours", 0.0)) +
                                  " GPU-hours (half-life " +
                                  formatDuration(fs.value("half_life_seconds", int64_t{0})) + ")"});
  }
  std::cout << formatFields(f);
  return Status::ok();
}

// ---------------------------------------------------------------- config check

Status runConfigCheck(const GlobalOptions& global, const std::string& file,
                      const std::string& kind) {
  // Each daemon's own reader, so the check accepts exactly what the daemon does.
  Status read;
  if (kind == "gpoold") {
    read = controller::readControllerSettings(file).status();
  } else if (kind == "agent") {
    read = agent::readAgentSettings(file).status();
  } else {
    return Status::invalidArgument("--kind: '" + kind + "' is not one of gpoold, agent");
  }
  std::vector<std::string> errors;
  if (!read.isOk()) {
    if (read.code() != StatusCode::kInvalidArgument) return read;
    std::stringstream ss(read.message());
    std::string line;
    while (std::getline(ss, line)) {
      if (!line.empty()) errors.push_back(line);
    }
  }
  if (global.json) {
    printJson(json{{"file", file}, {"kind", kind}, {"ok", errors.empty()}, {"errors", errors}});
  } else if (errors.empty()) {
    std::cout << "OK: " << file << " is a valid " << (kind == "agent" ? "gpool-agent" : kind)
              << " configuration\n";
  } else {
    for (const std::string& e : errors)
      std::cerr << e << "\n";
  }
  if (errors.empty()) return Status::ok();
  return Status::invalidArgument(file + ": " + std::to_string(errors.size()) +
                                 (errors.size() == 1 ? " problem" : " problems") +
                                 " (fix the keys named above; docs/config.md)");
}

}  // namespace

void registerAdminCommands(CLI::App& app, std::shared_ptr<GlobalOptions> global) {
  // ---- user
  auto* user = app.add_subcommand("user", "Users known to the pool: uid, groups, role (admins)");
  user->require_subcommand(1);
  user->footer(kFooter);
  {
    auto* list = user->add_subcommand("list", "List the user records you may see");
    list->footer(kFooter);
    list->callback(reporting([global] { return runUserList(*global); }));

    auto name = std::make_shared<std::string>();
    auto* show = user->add_subcommand("show", "Show one user record");
    show->add_option("USER", *name, "the user's name")->required();
    show->footer(kFooter);
    show->callback(reporting([global, name] { return runUserShow(*global, *name); }));

    auto add_args = std::make_shared<UserArgs>();
    auto* add = user->add_subcommand("add", "Add a user record (admins)");
    add->add_option("USER", add_args->name, "the Unix user name")->required();
    add->add_option("--uid", add_args->uid, "the uid (default: the local account's)")
        ->type_name("N");
    add->add_option("--group,--groups", add_args->groups,
                    "pool groups, the first is the default (repeatable, comma-separable)")
        ->type_name("GROUP")
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    add->add_option("--role", add_args->role, "user (default), group-admin or admin");
    add->add_option("--default-qos", add_args->default_qos, "the QoS of their jobs by default")
        ->each([add_args](const std::string&) { add_args->default_qos_given = true; });
    add->footer(kFooter);
    add->callback(reporting([global, add_args] { return runUserAdd(*global, *add_args); }));

    auto set_args = std::make_shared<UserArgs>();
    auto* set = user->add_subcommand("set", "Change a user record (admins)");
    set->add_option("USER", set_args->name, "the user's name")->required();
    set->add_option("--uid", set_args->uid, "the uid")->type_name("N");
    set->add_option("--groups", set_args->groups, "replace their groups (comma-separated)")
        ->type_name("GROUPS")
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    set->add_option("--add-group", set_args->add_groups, "add a group (repeatable)")
        ->type_name("GROUP")
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    set->add_option("--remove-group", set_args->remove_groups, "remove a group (repeatable)")
        ->type_name("GROUP")
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    set->add_option("--role", set_args->role, "user, group-admin or admin");
    set->add_option("--default-qos", set_args->default_qos,
                    "the QoS of their jobs by default (\"\": the pool's default)")
        ->each([set_args](const std::string&) { set_args->default_qos_given = true; });
    set->footer(kFooter);
    set->callback(reporting([global, set_args] { return runUserSet(*global, *set_args); }));

    auto rm_name = std::make_shared<std::string>();
    auto* rm = user->add_subcommand("remove", "Remove a user record and its quota (admins)");
    rm->add_option("USER", *rm_name, "the user's name")->required();
    rm->footer(kFooter);
    rm->callback(reporting([global, rm_name] { return runUserRemove(*global, *rm_name); }));
  }

  // ---- group
  auto* group = app.add_subcommand("group", "Groups: gid, project directory, members, admins");
  group->require_subcommand(1);
  group->footer(kFooter);
  {
    auto* list = group->add_subcommand("list", "List the groups with their members and admins");
    list->footer(kFooter);
    list->callback(reporting([global] { return runGroupList(*global); }));

    auto name = std::make_shared<std::string>();
    auto* show = group->add_subcommand("show", "Show one group");
    show->add_option("GROUP", *name, "the group's name")->required();
    show->footer(kFooter);
    show->callback(reporting([global, name] { return runGroupShow(*global, *name); }));

    auto multi = [](CLI::App* cmd, const std::string& flag, std::vector<std::string>& into,
                    const std::string& help) {
      cmd->add_option(flag, into, help)
          ->type_name("USER")
          ->expected(1)
          ->allow_extra_args(false)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    };
    auto add_args = std::make_shared<GroupArgs>();
    auto* add = group->add_subcommand("add", "Add a group, with its members and admins (admins)");
    add->add_option("GROUP", add_args->name, "the Unix group name")->required();
    add->add_option("--gid", add_args->gid, "the gid (default: the local group's)")->type_name("N");
    add->add_option("--project-dir", add_args->project_dir, "the group's shared directory")
        ->type_name("DIR")
        ->each([add_args](const std::string&) { add_args->project_dir_given = true; });
    multi(add, "--member", add_args->members, "a member (repeatable; needs a user record)");
    multi(add, "--admin", add_args->admins, "a member who administers the group (repeatable)");
    add->footer(kFooter);
    add->callback(reporting([global, add_args] { return runGroupAdd(*global, *add_args); }));

    auto set_args = std::make_shared<GroupArgs>();
    auto* set = group->add_subcommand("set", "Change a group and its members (admins)");
    set->add_option("GROUP", set_args->name, "the group's name")->required();
    set->add_option("--gid", set_args->gid, "the gid")->type_name("N");
    set->add_option("--project-dir", set_args->project_dir, "the group's shared directory")
        ->type_name("DIR")
        ->each([set_args](const std::string&) { set_args->project_dir_given = true; });
    multi(set, "--add-member", set_args->members, "add a member (repeatable)");
    multi(set, "--remove-member", set_args->remove_members, "remove a member (repeatable)");
    multi(set, "--add-admin", set_args->admins, "make a member a group admin (repeatable)");
    multi(set, "--remove-admin", set_args->remove_admins,
          "make a group admin a plain member (repeatable)");
    set->footer(kFooter);
    set->callback(reporting([global, set_args] { return runGroupSet(*global, *set_args); }));

    auto rm_name = std::make_shared<std::string>();
    auto* rm = group->add_subcommand("remove", "Remove a group and its quota (admins)");
    rm->add_option("GROUP", *rm_name, "the group's name")->required();
    rm->footer(kFooter);
    rm->callback(reporting([global, rm_name] { return runGroupRemove(*global, *rm_name); }));
  }

  // ---- quota
  auto quota_args = std::make_shared<QuotaArgs>();
  auto* quota =
      app.add_subcommand("quota", "Quotas of users and groups; --mine: yours and your use");
  quota->require_subcommand(0, 1);
  quota->add_flag("--mine", quota_args->mine, "your quotas and what you use of them");
  quota->footer(kFooter);
  {
    auto subject = [](CLI::App* cmd, QuotaArgs& a) {
      cmd->add_option("--user", a.user, "a user's quota")->type_name("USER");
      cmd->add_option("--group", a.group, "a group's quota")->type_name("GROUP");
    };
    auto list_args = std::make_shared<QuotaArgs>();
    auto* list = quota->add_subcommand("list", "List the quotas you may see");
    subject(list, *list_args);
    list->footer(kFooter);
    list->callback(reporting([global, list_args] { return runQuotaList(*global, *list_args); }));

    auto show_args = std::make_shared<QuotaArgs>();
    auto* show = quota->add_subcommand("show", "Show one quota");
    subject(show, *show_args);
    show->footer(kFooter);
    show->callback(reporting([global, show_args] { return runQuotaShow(*global, *show_args); }));

    auto set_args = std::make_shared<QuotaArgs>();
    auto* set = quota->add_subcommand(
        "set",
        "Set a quota's limits; the others keep their values (admins; group admins for "
        "their groups)");
    subject(set, *set_args);
    for (const LimitFlag& f : limitFlags()) {
      std::string field = f.field;
      set->add_option_function<std::string>(
             std::string("--") + f.flag,
             [set_args, field](const std::string& v) { set_args->limits[field] = v; }, f.help)
          ->type_name("VALUE");
    }
    set->footer(kFooter);
    set->callback(reporting([global, set_args] { return runQuotaSet(*global, *set_args); }));

    auto rm_args = std::make_shared<QuotaArgs>();
    auto* rm = quota->add_subcommand("remove", "Remove a quota (same rights as set)");
    subject(rm, *rm_args);
    rm->footer(kFooter);
    rm->callback(reporting([global, rm_args] { return runQuotaRemove(*global, *rm_args); }));
  }
  quota->callback(reporting([global, quota_args, quota]() -> Status {
    if (!quota->get_subcommands().empty()) {
      if (quota_args->mine) {
        return Status::invalidArgument("--mine goes alone: gpool quota --mine");
      }
      return Status::ok();
    }
    if (!quota_args->mine) {
      return Status::invalidArgument(
          "give a command (list, show, set, remove) or --mine (gpool quota --help)");
    }
    return runAccount(*global, true);
  }));

  // ---- qos
  auto* qos = app.add_subcommand("qos", "Quality-of-service levels: priority, limits, preemption");
  qos->require_subcommand(1);
  qos->footer(kFooter);
  {
    auto* list = qos->add_subcommand("list", "List the QoS levels");
    list->footer(kFooter);
    list->callback(reporting([global] { return runQosList(*global); }));
    for (bool add : {true, false}) {
      auto args = std::make_shared<QosArgs>();
      auto* cmd = qos->add_subcommand(add ? "add" : "set",
                                      add ? "Add a QoS level (admins)"
                                          : "Change a QoS level; the rest keeps its values "
                                            "(admins)");
      cmd->add_option("QOS", args->name, "the level's name")->required();
      for (const QosFlag& f : qosFlags()) {
        std::string field = f.field;
        cmd->add_option_function<std::string>(
               std::string("--") + f.flag,
               [args, field](const std::string& v) { args->values[field] = v; }, f.help)
            ->type_name("VALUE");
      }
      cmd->add_flag("--preemptible", args->preemptible,
                    "its jobs may be preempted for higher-priority work");
      if (!add) cmd->add_flag("--no-preemptible", args->no_preemptible, "not preemptible");
      cmd->footer(kFooter);
      cmd->callback(reporting([global, args, add] { return runQosWrite(*global, *args, add); }));
    }
    auto rm_name = std::make_shared<std::string>();
    auto* rm = qos->add_subcommand("remove", "Remove a QoS level (admins)");
    rm->add_option("QOS", *rm_name, "the level's name")->required();
    rm->footer(kFooter);
    rm->callback(reporting([global, rm_name] { return runQosRemove(*global, *rm_name); }));
  }

  // ---- alerts
  {
    auto all = std::make_shared<bool>(false);
    auto limit = std::make_shared<int64_t>(100);
    auto* alerts = app.add_subcommand(
        "alerts", "gpoold's alerts: firing ones (--all: history); show ID; ack ID (admins)");
    alerts->add_flag("--all", *all, "every alert, resolved ones too, newest first");
    alerts->add_option("--limit", *limit, "at most this many (1..10000, default 100)")
        ->check(CLI::Range(1, 10000));
    alerts->footer(kFooter);
    alerts->callback(reporting([global, all, limit, alerts] {
      if (!alerts->get_subcommands().empty()) return Status::ok();
      return runAlertsList(*global, *all, *limit);
    }));
    auto show_id = std::make_shared<int64_t>(0);
    auto* show = alerts->add_subcommand("show", "One alert with its history");
    show->add_option("ID", *show_id, "the alert's id (gpool alerts)")->required();
    show->footer(kFooter);
    show->callback(reporting([global, show_id] { return runAlertsShow(*global, *show_id); }));
    auto ack_id = std::make_shared<int64_t>(0);
    auto* ack = alerts->add_subcommand(
        "ack", "Acknowledge an alert (admins); it keeps firing until its condition clears");
    ack->add_option("ID", *ack_id, "the alert's id (gpool alerts)")->required();
    ack->footer(kFooter);
    ack->callback(reporting([global, ack_id] { return runAlertsAck(*global, *ack_id); }));
  }

  // ---- gpu clear
  {
    auto target = std::make_shared<std::string>();
    auto* gpu = app.add_subcommand("gpu", "GPUs: clear a GPU held after a fatal error (admins)");
    gpu->require_subcommand(1);
    auto* clear = gpu->add_subcommand(
        "clear", "Return a GPU held out of scheduling after a fatal XID (admins)");
    clear->add_option("NODE/GPU", *target, "the node and the GPU's index, e.g. gpu-01/3")
        ->required();
    clear->footer(kFooter);
    clear->callback(reporting([global, target] { return runGpuClear(*global, *target); }));
  }

  // ---- drain / resume
  auto drain_node = std::make_shared<std::string>();
  auto drain_reason = std::make_shared<std::string>();
  auto* drain = app.add_subcommand(
      "drain", "Drain a server (admins): running jobs finish, nothing new starts there");
  drain->add_option("NODE", *drain_node, "the node's name (gpool nodes)")->required();
  drain->add_option("--reason", *drain_reason, "why (shows in gpool nodes); required")
      ->type_name("TEXT");
  drain->footer(kFooter);
  drain->callback(reporting([global, drain_node, drain_reason] {
    return runDrain(*global, *drain_node, *drain_reason);
  }));

  // ---- node remove
  auto* node = app.add_subcommand("node", "Remove a server from the pool (admins)");
  node->require_subcommand(1);
  node->footer(kFooter);
  {
    auto name = std::make_shared<std::string>();
    auto* remove = node->add_subcommand("remove",
                                        "Remove a server: its record, GPUs and agent credentials "
                                        "(admins; nothing may run there)");
    remove->add_option("NODE", *name, "the node's name (gpool nodes)")->required();
    remove->footer(kFooter);
    remove->callback(reporting([global, name] { return runNodeRemove(*global, *name); }));
  }

  auto resume_node = std::make_shared<std::string>();
  auto* resume = app.add_subcommand("resume", "Resume a drained server (admins)");
  resume->add_option("NODE", *resume_node, "the node's name")->required();
  resume->footer(kFooter);
  resume->callback(reporting([global, resume_node] { return runResume(*global, *resume_node); }));

  // ---- usage
  auto usage_args = std::make_shared<UsageArgs>();
  auto* usage = app.add_subcommand(
      "usage", "GPU-hours by user or group over a period (slices count by their share)");
  usage->add_option("--by", usage_args->by, "user (default) or group");
  usage
      ->add_option("--from", usage_args->from,
                   "start: YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or Unix seconds, UTC (default: 30 "
                   "days before --to)")
      ->type_name("DATE");
  usage->add_option("--to", usage_args->to, "end, same forms (default: now)")->type_name("DATE");
  usage->add_flag("--csv", usage_args->csv, "CSV with a header row (RFC 4180)");
  usage->add_flag("--mine", usage_args->mine, "only yours (or your groups'), with your fair share");
  usage->footer(kFooter);
  usage->callback(reporting([global, usage_args] { return runUsage(*global, *usage_args); }));

  // ---- account
  auto* account = app.add_subcommand(
      "account", "Who you are to the pool: user, groups, role, quotas, use, fair share");
  account->require_subcommand(0, 1);
  account->footer(kFooter);
  auto* account_quota = account->add_subcommand("quota", "Your quotas and what you use of them");
  account_quota->footer(kFooter);
  account_quota->callback(reporting([global] { return runAccount(*global, true); }));
  account->callback(reporting([global, account]() -> Status {
    if (!account->get_subcommands().empty()) return Status::ok();
    return runAccount(*global, false);
  }));

  // ---- config check
  auto* config = app.add_subcommand("config", "Configuration files");
  config->require_subcommand(1);
  config->footer(kFooter);
  auto config_file = std::make_shared<std::string>();
  auto config_kind = std::make_shared<std::string>("gpoold");
  auto* check = config->add_subcommand(
      "check",
      "Check a configuration file as the daemon would read it: OK, or every problem "
      "with file:line and key");
  check
      ->add_option("FILE", *config_file,
                   "the file (e.g. /etc/gpool/gpoold.toml, /etc/gpool/gpool-agent.toml)")
      ->required();
  check->add_option("--kind", *config_kind,
                    "gpoold (default) or agent (gpool-agent --config's file)");
  check->footer(kFooter);
  check->callback(reporting([global, config_file, config_kind] {
    return runConfigCheck(*global, *config_file, *config_kind);
  }));
}

}  // namespace gpool::cli
