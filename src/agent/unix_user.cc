#include "agent/unix_user.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gpool::agent {

Result<UnixUser> lookupUnixUser(const std::string& name) {
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  int rc;
  while ((rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found)) == ERANGE) {
    buf.resize(buf.size() * 2);
  }
  if (rc != 0) {
    return Status::ioError("cannot look up user '" + name + "': " + std::strerror(rc));
  }
  if (found == nullptr) return Status::notFound("no Unix user named '" + name + "'");
  UnixUser user;
  user.name = pw.pw_name;
  user.uid = pw.pw_uid;
  user.gid = pw.pw_gid;
  user.home = pw.pw_dir ? pw.pw_dir : "/";
  user.shell = pw.pw_shell ? pw.pw_shell : "/bin/sh";
  int count = 32;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  while (::getgrouplist(user.name.c_str(), user.gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count) + 16);
    count = static_cast<int>(groups.size());
  }
  groups.resize(static_cast<size_t>(count));
  user.groups = std::move(groups);
  return user;
}

std::string processUserName(pid_t pid) {
  if (pid <= 0) return "";
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  long long uid = -1;
  while (std::getline(status, line)) {
    // "Uid:\t<real>\t<effective>\t<saved>\t<filesystem>"
    if (line.rfind("Uid:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      if (!(fields >> uid)) uid = -1;
      break;
    }
  }
  if (uid < 0) return "";
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  int rc;
  while ((rc = ::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found)) ==
         ERANGE) {
    buf.resize(buf.size() * 2);
  }
  if (rc != 0 || found == nullptr) return "#" + std::to_string(uid);
  return pw.pw_name;
}

}  // namespace gpool::agent
