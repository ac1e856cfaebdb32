#include "controller/permissions.h"

#include <gtest/gtest.h>

namespace gpool::controller {
namespace {

// Whose job the action targets, relative to the caller "alice" (member/admin of group "ml").
enum class Target { kOwn, kGroupMate, kOtherGroup };

JobOwner ownerFor(Target target) {
  switch (target) {
    case Target::kOwn: return {"alice", "ml"};
    case Target::kGroupMate: return {"bob", "ml"};
    case Target::kOtherGroup: return {"carol", "vision"};
  }
  return {};
}

Caller callerWith(Role role) {
  Caller c;
  c.user = "alice";
  c.uid = 1001;
  c.role = role;
  if (role == Role::kGroupAdmin) c.admin_groups = {"ml"};
  return c;
}

// The whole matrix: each role, each action, each kind of target.
TEST(Permissions, MatrixOfRoleActionTarget) {
  const JobAction actions[] = {JobAction::kShow,    JobAction::kCancel,  JobAction::kHold,
                               JobAction::kRelease, JobAction::kRequeue, JobAction::kReadLog};
  const Target targets[] = {Target::kOwn, Target::kGroupMate, Target::kOtherGroup};
  int checked = 0;
  for (Role role : {Role::kUser, Role::kGroupAdmin, Role::kAdmin}) {
    for (JobAction action : actions) {
      for (Target target : targets) {
        bool expected = false;
        switch (role) {
          case Role::kUser: expected = target == Target::kOwn; break;
          case Role::kGroupAdmin: expected = target != Target::kOtherGroup; break;
          case Role::kAdmin: expected = true; break;
        }
        Status s = checkJobAction(callerWith(role), action, ownerFor(target));
        SCOPED_TRACE(std::string(roleName(role)) + " " + std::string(jobActionName(action)) +
                     " target " + std::to_string(static_cast<int>(target)));
        EXPECT_EQ(s.isOk(), expected) << s.toString();
        if (!expected) {
          EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
          EXPECT_NE(s.message().find(std::string(jobActionName(action))), std::string::npos);
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 54);
}

TEST(Permissions, GroupAdminOfNoGroupIsAUser) {
  Caller c = callerWith(Role::kGroupAdmin);
  c.admin_groups.clear();
  EXPECT_FALSE(checkJobAction(c, JobAction::kShow, {"bob", "ml"}).isOk());
  // A job without a group is never a group admin's business.
  c.admin_groups = {""};
  EXPECT_FALSE(checkJobAction(c, JobAction::kShow, {"bob", ""}).isOk());
}

TEST(Permissions, Submit) {
  EXPECT_TRUE(checkSubmit(callerWith(Role::kUser), "alice", "ml").isOk());
  EXPECT_EQ(checkSubmit(callerWith(Role::kUser), "bob", "ml").code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(checkSubmit(callerWith(Role::kGroupAdmin), "bob", "ml").isOk());
  EXPECT_FALSE(checkSubmit(callerWith(Role::kGroupAdmin), "carol", "vision").isOk());
  EXPECT_TRUE(checkSubmit(callerWith(Role::kAdmin), "carol", "vision").isOk());
}

TEST(Permissions, NodeAdminOnly) {
  EXPECT_FALSE(checkNodeAdmin(callerWith(Role::kUser)).isOk());
  EXPECT_FALSE(checkNodeAdmin(callerWith(Role::kGroupAdmin)).isOk());
  EXPECT_TRUE(checkNodeAdmin(callerWith(Role::kAdmin)).isOk());
}

TEST(Permissions, RoleNamesRoundTrip) {
  for (Role role : {Role::kUser, Role::kGroupAdmin, Role::kAdmin}) {
    auto parsed = parseRole(roleName(role));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, role);
  }
  EXPECT_EQ(parseRole("root").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpool::controller
