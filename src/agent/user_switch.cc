// switchToUser lives apart from the NSS lookups so that the statically linked supervisor,
// which only switches, does not pull getpwnam and friends (NSS needs the shared libc).
#include <grp.h>
#include <unistd.h>

#include <cerrno>

#include "agent/unix_user.h"

namespace gpool::agent {

int switchToUser(const UnixUser& user) {
  if (::setgroups(user.groups.size(), user.groups.data()) != 0) return errno;
  if (::setgid(user.gid) != 0) return errno;
  if (::setuid(user.uid) != 0) return errno;
  if (user.uid != 0 && (::setuid(0) == 0 || ::geteuid() == 0)) return EPERM;
  return 0;
}

}  // namespace gpool::agent
