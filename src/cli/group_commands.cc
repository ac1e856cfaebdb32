// `gpool group list|show|add|set|remove`: the pool's groups with their members and group
// admins through gpoold's /v1/groups (members come from the user records).
#include <grp.h>

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
#include "net/http.h"

namespace gpool::cli::admin {

namespace {

using nlohmann::json;

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
  return getRecord(
      api, "/v1/groups/" + pathName(name),
      "group '" + name + "' does not exist (add it with `gpool group add " + name + "`)");
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

}  // namespace

void registerGroupCommands(CLI::App& app, const std::shared_ptr<GlobalOptions>& global) {
  // ---- group
  auto* group = app.add_subcommand("group", "Groups: gid, project directory, members, admins");
  group->require_subcommand(1);
  group->footer(kFooter);
  {
    auto* list = group->add_subcommand("list", "List the groups with their members and admins");
    list->footer(kFooter);
    list->callback(reporting([global] { return runGroupList(*global); }));

    addNamedCommand(*group, "show", "Show one group", "GROUP", "the group's name",
                    [global](const std::string& name) { return runGroupShow(*global, name); });

    auto multi = [](CLI::App* cmd, const std::string& flag, std::vector<std::string>& into,
                    const std::string& help) { addRepeatable(cmd, flag, into, help, "USER"); };
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

    addNamedCommand(*group, "remove", "Remove a group and its quota (admins)", "GROUP",
                    "the group's name",
                    [global](const std::string& name) { return runGroupRemove(*global, name); });
  }
}

}  // namespace gpool::cli::admin
