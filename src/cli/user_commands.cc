// `gpool user list|show|add|set|remove`: the pool's user records (uid, groups, role, default
// QoS) through gpoold's /v1/users.
#include <pwd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/user.h"
#include "cli/admin_common.h"
#include "cli/api_client.h"
#include "cli/client_commands.h"
#include "cli/format.h"
#include "common/status.h"
#include "common/units.h"

namespace gpool::cli::admin {

namespace {

using nlohmann::json;

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
  return getRecord(api, "/v1/users/" + pathName(name),
                   "user '" + name + "' has no record (add it with `gpool user add " + name + "`)");
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

Status runUserRemove(const GlobalOptions& global, const std::string& name) {
  GPOOL_RETURN_IF_ERROR(validName(name, "user name", "USER"));
  return removeThing(global, "/v1/users/" + pathName(name), "user " + name, "user remove",
                     kAdminRole);
}

}  // namespace

void registerUserCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global) {
  // ---- user
  auto* user = app.add_subcommand("user", "Users known to the pool: uid, groups, role (admins)");
  user->require_subcommand(1);
  user->footer(kFooter);
  {
    auto* list = user->add_subcommand("list", "List the user records you may see");
    list->footer(kFooter);
    list->callback(reporting([global] { return runUserList(*global); }));

    addNamedCommand(*user, "show", "Show one user record", "USER", "the user's name",
                    [global](const std::string& name) { return runUserShow(*global, name); });

    auto add_args = std::make_shared<UserArgs>();
    auto* add = user->add_subcommand("add", "Add a user record (admins)");
    add->add_option("USER", add_args->name, "the Unix user name")->required();
    add->add_option("--uid", add_args->uid, "the uid (default: the local account's)")
        ->type_name("N");
    addRepeatable(add, "--group,--groups", add_args->groups,
                  "pool groups, the first is the default (repeatable, comma-separable)", "GROUP");
    add->add_option("--role", add_args->role, "user (default), group-admin or admin");
    add->add_option("--default-qos", add_args->default_qos, "the QoS of their jobs by default")
        ->each([add_args](const std::string&) { add_args->default_qos_given = true; });
    add->footer(kFooter);
    add->callback(reporting([global, add_args] { return runUserAdd(*global, *add_args); }));

    auto set_args = std::make_shared<UserArgs>();
    auto* set = user->add_subcommand("set", "Change a user record (admins)");
    set->add_option("USER", set_args->name, "the user's name")->required();
    set->add_option("--uid", set_args->uid, "the uid")->type_name("N");
    addRepeatable(set, "--groups", set_args->groups, "replace their groups (comma-separated)",
                  "GROUPS");
    addRepeatable(set, "--add-group", set_args->add_groups, "add a group (repeatable)", "GROUP");
    addRepeatable(set, "--remove-group", set_args->remove_groups, "remove a group (repeatable)",
                  "GROUP");
    set->add_option("--role", set_args->role, "user, group-admin or admin");
    set->add_option("--default-qos", set_args->default_qos,
                    "the QoS of their jobs by default (\"\": the pool's default)")
        ->each([set_args](const std::string&) { set_args->default_qos_given = true; });
    set->footer(kFooter);
    set->callback(reporting([global, set_args] { return runUserSet(*global, *set_args); }));

    addNamedCommand(*user, "remove", "Remove a user record and its quota (admins)", "USER",
                    "the user's name",
                    [global](const std::string& name) { return runUserRemove(*global, name); });
  }
}

}  // namespace gpool::cli::admin
