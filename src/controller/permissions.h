#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/user.h"
#include "common/result.h"
#include "common/status.h"

// Who may do what to which job. A pure function of the caller, the action and the job's owner,
// so the whole matrix (each role x each action x own / group's / other's job) is tested without
// a store or a server.
namespace gpool::controller {

// The caller's role is the one of the user's record (api::Role, spelled "user", "group-admin",
// "admin" on the wire and in the store): one enum for the whole pool.
using api::parseRole;
using api::Role;
using api::roleName;

// The authenticated identity a request runs as (from the peer credentials or an API token).
struct Caller {
  std::string user;
  uint32_t uid = 0;
  Role role = Role::kUser;
  // Groups this caller administers (meaningful for kGroupAdmin).
  std::vector<std::string> admin_groups;
};

enum class JobAction {
  kShow,  // read the job, its events and its environment
  kCancel,
  kHold,
  kRelease,
  kRequeue,
  kReadLog,  // read the task's output (GET /v1/jobs/{id}/log)
};
std::string_view jobActionName(JobAction action);

// The job an action targets.
struct JobOwner {
  std::string user;
  std::string group;  // may be empty
};

// OK when `caller` may do `action` on a job owned by `owner`; otherwise PermissionDenied naming
// the caller, the action and the job's owner.
Status checkJobAction(const Caller& caller, JobAction action, const JobOwner& owner);

// True when `caller` acts on this job as an administrator: an admin, or the admin of the
// job's group (holds they place are admin holds; they may release admin holds).
bool actsAsAdminFor(const Caller& caller, const JobOwner& owner);

// Submitting as `as_user` into `group`: anyone as themselves, an admin as anyone, a group admin
// as anyone into one of its groups.
Status checkSubmit(const Caller& caller, std::string_view as_user, std::string_view group);

// Node registry changes (drain, resume, delete): admins only.
Status checkNodeAdmin(const Caller& caller);

// Changes to the catalog (users, groups, QoS levels): admins only. `what` names the change in
// the message ("change user 'bob'").
Status checkCatalogAdmin(const Caller& caller, std::string_view what);

// Setting or removing a quota: admins; a group admin for the groups it administers.
Status checkQuotaChange(const Caller& caller, bool is_group, std::string_view name);

// Reading accounts (user records, quotas, usage rows). An admin sees everything; a caller sees
// their own user; a group admin also sees the groups it administers and, for user records, the
// members of those groups (`member_of`: the groups of the user record read; empty otherwise).
bool maySeeUser(const Caller& caller, std::string_view user,
                const std::vector<std::string>& member_of = {});
bool maySeeGroup(const Caller& caller, std::string_view group);

}  // namespace gpool::controller
