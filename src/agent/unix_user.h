#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.h"

namespace gpool::agent {

// A Unix account from the passwd and group databases (NSS: files, LDAP, SSSD alike).
struct UnixUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;  // primary group
  std::string home;
  std::string shell;
  std::vector<gid_t> groups;  // supplementary groups, including the primary one
};

// Looks `name` up. NotFound when no such user exists. Thread-safe (getpwnam_r, getgrouplist).
Result<UnixUser> lookupUnixUser(const std::string& name);

// Who runs process `pid`: its real uid (the Uid line of /proc/PID/status) as a user name, or
// "#<uid>" when the password database has none; "" when the process is gone or unreadable.
// Thread-safe (getpwuid_r).
std::string processUserName(pid_t pid);

// Drops the calling process to `user`: setgroups, setgid, setuid, then checks that root cannot
// be regained. For the child between fork and exec; async-signal-unsafe work (lookups) must be
// done before. Returns the errno of the failing call, 0 on success. A process that is not root
// and already runs as `user` (uid and primary gid) is left as it is.
int switchToUser(const UnixUser& user);

}  // namespace gpool::agent
