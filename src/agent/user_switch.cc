// switchToUser lives apart from the NSS lookups so that the statically linked supervisor,
// which only switches, does not pull getpwnam and friends (NSS needs the shared libc).
#include <grp.h>
#include <unistd.h>

#include <cerrno>

#include "agent/unix_user.h"

namespace gpool::agent {

int switchToUser(const UnixUser& user) {
  // An unprivileged agent (a `gpool up` pool run by a plain user) can only run its own user's
  // tasks: it is that user already, and setgroups would fail with EPERM.
  if (::geteuid() != 0 && ::getuid() == user.uid && ::geteuid() == user.uid &&
      ::getgid() == user.gid) {
    return 0;
  }
  if (::setgroups(user.groups.size(), user.groups.data()) != 0) return errno;
  if (::setgid(user.gid) != 0) return errno;
  if (::setuid(user.uid) != 0) return errno;
  if (user.uid != 0 && (::setuid(0) == 0 || ::geteuid() == 0)) return EPERM;
  return 0;
}

}  // namespace gpool::agent
