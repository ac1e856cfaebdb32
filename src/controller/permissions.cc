#include "controller/permissions.h"

#include <algorithm>
#include <string>

namespace gpool::controller {

std::string_view jobActionName(JobAction action) {
  switch (action) {
    case JobAction::kShow: return "show";
    case JobAction::kCancel: return "cancel";
    case JobAction::kHold: return "hold";
    case JobAction::kRelease: return "release";
    case JobAction::kRequeue: return "requeue";
    case JobAction::kReadLog: return "read the log of";
  }
  return "show";
}

namespace {

bool administers(const Caller& caller, std::string_view group) {
  if (caller.role != Role::kGroupAdmin || group.empty()) return false;
  return std::find(caller.admin_groups.begin(), caller.admin_groups.end(), group) !=
         caller.admin_groups.end();
}

}  // namespace

Status checkJobAction(const Caller& caller, JobAction action, const JobOwner& owner) {
  if (caller.role == Role::kAdmin) return Status::ok();
  if (!caller.user.empty() && caller.user == owner.user) return Status::ok();
  if (administers(caller, owner.group)) return Status::ok();
  return Status::permissionDenied(std::string(roleName(caller.role)) + " '" + caller.user +
                                  "' may not " + std::string(jobActionName(action)) +
                                  " a job of user '" + owner.user + "' in group '" + owner.group +
                                  "'");
}

bool actsAsAdminFor(const Caller& caller, const JobOwner& owner) {
  return caller.role == Role::kAdmin || administers(caller, owner.group);
}

Status checkSubmit(const Caller& caller, std::string_view as_user, std::string_view group) {
  if (caller.role == Role::kAdmin) return Status::ok();
  if (as_user == caller.user) return Status::ok();
  if (administers(caller, group)) return Status::ok();
  return Status::permissionDenied(std::string(roleName(caller.role)) + " '" + caller.user +
                                  "' may not submit as user '" + std::string(as_user) + "'");
}

Status checkNodeAdmin(const Caller& caller) {
  if (caller.role == Role::kAdmin) return Status::ok();
  return Status::permissionDenied(std::string(roleName(caller.role)) + " '" + caller.user +
                                  "' may not change nodes (admin only)");
}

Status checkCatalogAdmin(const Caller& caller, std::string_view what) {
  if (caller.role == Role::kAdmin) return Status::ok();
  return Status::permissionDenied(std::string(roleName(caller.role)) + " '" + caller.user +
                                  "' may not " + std::string(what) + " (admin only)");
}

Status checkQuotaChange(const Caller& caller, bool is_group, std::string_view name) {
  if (caller.role == Role::kAdmin) return Status::ok();
  if (is_group && administers(caller, name)) return Status::ok();
  return Status::permissionDenied(std::string(roleName(caller.role)) + " '" + caller.user +
                                  "' may not change the quota of " +
                                  (is_group ? "group '" : "user '") + std::string(name) +
                                  "' (admins; group admins for their groups)");
}

bool maySeeUser(const Caller& caller, std::string_view user,
                const std::vector<std::string>& member_of) {
  if (caller.role == Role::kAdmin || (!caller.user.empty() && caller.user == user)) return true;
  return std::any_of(member_of.begin(), member_of.end(),
                     [&](const std::string& g) { return administers(caller, g); });
}

bool maySeeGroup(const Caller& caller, std::string_view group) {
  return caller.role == Role::kAdmin || administers(caller, group);
}

}  // namespace gpool::controller
