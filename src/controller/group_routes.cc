// Group changes that also change the members' user records (membership lives there), each
// applied in one store transaction (Store::writeCatalog), so that a change that fails half-way
// (an unknown member) leaves nothing behind:
//   POST   /v1/groups         a new group with its members and admins
//   PATCH  /v1/groups/{name}  gid, project directory, members and admins added or removed
//   DELETE /v1/groups/{name}  the group, its quota, and the group in its members' records
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "api/user.h"
#include "controller/route_helpers.h"
#include "store/api_codec.h"

namespace gpool::controller::routes {

namespace {

using nlohmann::json;

// What a change does to the members, applied in this order (the CLI's): add members, add
// admins (members who administer the group), demote admins, remove members.
struct MembershipChange {
  std::vector<std::string> add_members;
  std::vector<std::string> add_admins;
  std::vector<std::string> remove_admins;
  std::vector<std::string> remove_members;
  bool empty() const {
    return add_members.empty() && add_admins.empty() && remove_admins.empty() &&
           remove_members.empty();
  }
};

// The user records a change touches, as read (the write's expectation) and as changed.
struct Touched {
  store::UserRecord read;
  api::User user;
};

// The body keys of a change's lists, for errors: POST's "members" and "admins", PATCH's
// "add_members" and "add_admins".
struct MembershipKeys {
  std::string add_members = "add_members";
  std::string add_admins = "add_admins";
};

// Applies `change` to the members of `group`: the user updates of one transaction. Errors
// name the field of the offending name ("group.add_members[1]: ...").
Result<std::vector<store::CatalogWrites::UserUpdate>> memberUpdates(store::Store& store,
                                                                    const std::string& group,
                                                                    const MembershipChange& change,
                                                                    const std::string& path,
                                                                    const MembershipKeys& keys) {
  std::map<std::string, Touched> touched;
  auto load = [&](const std::string& key, size_t i, const std::string& name) -> Result<api::User*> {
    const std::string field = path + "." + key + "[" + std::to_string(i) + "]";
    Status valid = api::validateAccountName(name, "user name");
    if (!valid.isOk()) return valid.withContext(field);
    auto it = touched.find(name);
    if (it == touched.end()) {
      Result<store::UserRecord> read = store.getUser(name);
      if (!read.ok()) {
        if (read.status().code() != StatusCode::kNotFound) return read.status();
        return Status::notFound(field + ": user '" + name +
                                "' has no user record (add it first: gpool user add " + name + ")");
      }
      GPOOL_ASSIGN_OR_RETURN(api::User user, store::apiUserFrom(*read));
      it = touched.emplace(name, Touched{std::move(*read), std::move(user)}).first;
    }
    return &it->second.user;
  };
  auto addGroup = [&](api::User* u) {
    if (std::find(u->groups.begin(), u->groups.end(), group) == u->groups.end()) {
      u->groups.push_back(group);
    }
  };
  for (size_t i = 0; i < change.add_members.size(); ++i) {
    GPOOL_ASSIGN_OR_RETURN(api::User * u, load(keys.add_members, i, change.add_members[i]));
    addGroup(u);
  }
  for (size_t i = 0; i < change.add_admins.size(); ++i) {
    GPOOL_ASSIGN_OR_RETURN(api::User * u, load(keys.add_admins, i, change.add_admins[i]));
    addGroup(u);
    if (u->role == api::Role::kUser) u->role = api::Role::kGroupAdmin;
  }
  for (size_t i = 0; i < change.remove_admins.size(); ++i) {
    GPOOL_ASSIGN_OR_RETURN(api::User * u, load("remove_admins", i, change.remove_admins[i]));
    addGroup(u);
    if (u->role == api::Role::kGroupAdmin) u->role = api::Role::kUser;
  }
  for (size_t i = 0; i < change.remove_members.size(); ++i) {
    const std::string& name = change.remove_members[i];
    GPOOL_ASSIGN_OR_RETURN(api::User * u, load("remove_members", i, name));
    auto it = std::find(u->groups.begin(), u->groups.end(), group);
    if (it == u->groups.end()) {
      return Status::invalidArgument(path + ".remove_members[" + std::to_string(i) + "]: user '" +
                                     name + "' is not a member of group '" + group + "'");
    }
    u->groups.erase(it);
    if (u->role == api::Role::kGroupAdmin) u->role = api::Role::kUser;
  }
  std::vector<store::CatalogWrites::UserUpdate> out;
  for (auto& [name, t] : touched) {
    out.push_back({store::userRecordFor(t.user), t.read.info_json});
  }
  return out;
}

// The group as the API shows it, with its members and admins from the user records.
Result<json> groupWithMembers(store::Store& store, const std::string& name) {
  GPOOL_ASSIGN_OR_RETURN(api::Group group, store::loadApiGroup(store, name));
  json out = api::toJson(group);
  json members = json::array();
  json admins = json::array();
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::UserRecord> users, store.listUsers());
  for (const store::UserRecord& record : users) {
    GPOOL_ASSIGN_OR_RETURN(api::User u, store::apiUserFrom(record));
    if (std::find(u.groups.begin(), u.groups.end(), name) == u.groups.end()) continue;
    members.push_back(u.name);
    if (u.role == api::Role::kGroupAdmin) admins.push_back(u.name);
  }
  out["members"] = std::move(members);
  out["admins"] = std::move(admins);
  return out;
}

Result<std::string> groupName(const net::Request& req) {
  std::string name = req.pathParam("name");
  Status valid = api::validateAccountName(name, "group name");
  if (!valid.isOk()) return valid.withContext("name");
  return name;
}

}  // namespace

Status removeGroupWithMembers(store::Store& store, const std::string& name,
                              std::vector<std::string>* members_removed) {
  MembershipChange change;
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::UserRecord> users, store.listUsers());
  for (const store::UserRecord& record : users) {
    GPOOL_ASSIGN_OR_RETURN(api::User u, store::apiUserFrom(record));
    if (std::find(u.groups.begin(), u.groups.end(), name) != u.groups.end()) {
      change.remove_members.push_back(u.name);
    }
  }
  store::CatalogWrites writes;
  GPOOL_ASSIGN_OR_RETURN(writes.update_users,
                         memberUpdates(store, name, change, "group", MembershipKeys{}));
  writes.delete_groups.push_back(name);
  GPOOL_RETURN_IF_ERROR(store.writeCatalog(writes));
  if (members_removed) *members_removed = change.remove_members;
  return Status::ok();
}

Status addGroupRoutes(net::Router& router, const Context& ctx) {
  store::Store& store = *ctx.store;
  Status added = router.add(
      net::Method::kPost, "/v1/groups",
      authed(ctx, {},
             [&store](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_RETURN_IF_ERROR(checkCatalogAdmin(caller, "add a group"));
               GPOOL_ASSIGN_OR_RETURN(json body, parseObjectBody(req, false));
               // Members and admins are not part of the group's record: taken out before it is
               // read.
               MembershipChange change;
               json lists = json::object();
               for (const char* key : {"members", "admins"}) {
                 if (body.contains(key)) {
                   lists[key] = body[key];
                   body.erase(key);
                 }
               }
               api::ObjectReader r(lists, "group");
               r.stringList("members", &change.add_members);
               r.stringList("admins", &change.add_admins);
               GPOOL_RETURN_IF_ERROR(r.finish());
               api::Group group;
               GPOOL_RETURN_IF_ERROR(api::fromJson(body, &group, "group"));
               if (group.quota) {
                 return Status::invalidArgument(
                     "group.quota: set quotas with PUT /v1/quotas/group/" + group.name);
               }
               store::CatalogWrites writes;
               writes.create_groups.push_back(store::groupRecordFor(group));
               GPOOL_ASSIGN_OR_RETURN(writes.update_users,
                                      memberUpdates(store, group.name, change, "group",
                                                    MembershipKeys{"members", "admins"}));
               GPOOL_RETURN_IF_ERROR(store.writeCatalog(writes));
               GPOOL_ASSIGN_OR_RETURN(json out, groupWithMembers(store, group.name));
               return jsonResponse(201, out);
             }));
  if (!added.isOk()) return added;

  return router.add(
      net::Method::kPatch, "/v1/groups/{name}",
      authed(ctx, {},
             [&store](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(std::string name, groupName(req));
               GPOOL_RETURN_IF_ERROR(checkCatalogAdmin(caller, "change group '" + name + "'"));
               GPOOL_ASSIGN_OR_RETURN(json body, parseObjectBody(req, false));
               std::optional<uint32_t> gid;
               std::optional<std::string> project_dir;
               MembershipChange change;
               api::ObjectReader r(body, "group");
               r.optionalInteger("gid", &gid, 0u, 4'294'967'294u);
               r.optionalString("project_dir", &project_dir);
               r.stringList("add_members", &change.add_members);
               r.stringList("add_admins", &change.add_admins);
               r.stringList("remove_admins", &change.remove_admins);
               r.stringList("remove_members", &change.remove_members);
               r.check(!project_dir || project_dir->empty() || project_dir->front() == '/',
                       "project_dir", "must be an absolute path");
               r.check(gid || project_dir || !change.empty(), "gid",
                       "nothing to change: give gid, project_dir, add_members, remove_members, "
                       "add_admins or remove_admins");
               GPOOL_RETURN_IF_ERROR(r.finish());
               GPOOL_ASSIGN_OR_RETURN(api::Group group, store::loadApiGroup(store, name));
               store::CatalogWrites writes;
               if (gid || project_dir) {
                 if (gid) group.gid = *gid;
                 if (project_dir) group.project_dir = *project_dir;
                 writes.update_groups.push_back(store::groupRecordFor(group));
               }
               GPOOL_ASSIGN_OR_RETURN(
                   writes.update_users,
                   memberUpdates(store, name, change, "group", MembershipKeys{}));
               GPOOL_RETURN_IF_ERROR(store.writeCatalog(writes));
               GPOOL_ASSIGN_OR_RETURN(json out, groupWithMembers(store, name));
               return jsonResponse(200, out);
             }));
}

}  // namespace gpool::controller::routes
