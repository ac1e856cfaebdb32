#include "agent/sys_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace gpool::agent {
namespace {

Status writeAll(int fd, std::string_view contents, const std::string& path) {
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errnoStatus("write failed", path, errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status writeViaTemp(const std::string& path, std::string_view contents, mode_t mode, bool sync) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return errnoStatus("cannot create", tmp, errno);
  Status st = writeAll(fd, contents, tmp);
  if (st.isOk() && sync && ::fsync(fd) != 0) st = errnoStatus("fsync failed", tmp, errno);
  if (::close(fd) != 0 && st.isOk()) st = errnoStatus("close failed", tmp, errno);
  if (st.isOk() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = errnoStatus("cannot rename into place", path, errno);
  }
  if (!st.isOk()) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (sync) {
    std::string dir = std::filesystem::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return errnoStatus("cannot open directory", dir, errno);
    int rc = ::fsync(dfd);
    int err = errno;
    ::close(dfd);
    if (rc != 0) return errnoStatus("fsync failed", dir, err);
  }
  return Status::ok();
}

}  // namespace

Status errnoStatus(std::string_view what, const std::string& path, int err) {
  std::string msg = std::string(what) + ": " + path + ": " + std::strerror(err);
  if (err == ENOENT) return Status::notFound(msg);
  if (err == EACCES || err == EPERM) return Status::permissionDenied(msg);
  return Status::ioError(msg);
}

Status writeFileDurably(const std::string& path, std::string_view contents, mode_t mode) {
  return writeViaTemp(path, contents, mode, /*sync=*/true);
}

Status writeFileAtomically(const std::string& path, std::string_view contents, mode_t mode) {
  return writeViaTemp(path, contents, mode, /*sync=*/false);
}

Status writeExistingFile(const std::string& path, std::string_view contents) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errnoStatus("cannot open for writing", path, errno);
  ssize_t n;
  do {
    n = ::write(fd, contents.data(), contents.size());
  } while (n < 0 && errno == EINTR);
  int err = errno;
  ::close(fd);
  if (n < 0) {
    return errnoStatus("cannot write '" + std::string(contents) + "' to", path, err);
  }
  return Status::ok();
}

Result<std::string> readFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errnoStatus("cannot open", path, errno);
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return errnoStatus("cannot read", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status makeDirs(const std::string& path, mode_t mode) {
  std::string cur;
  for (const std::string& part : splitString(path, '/')) {
    cur += "/" + part;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) {
      return errnoStatus("cannot create directory", cur, errno);
    }
  }
  return Status::ok();
}

Status grantSearchToUser(const std::string& path, uid_t uid) {
  // The kernel's "system.posix_acl_access" value (linux/posix_acl_xattr.h): a little-endian
  // version 2 header, then {tag u16, perm u16, id u32} entries sorted by tag. No libacl needed.
  constexpr uint16_t kUserObj = 0x01, kUser = 0x02, kGroupObj = 0x04, kMask = 0x10, kOther = 0x20;
  constexpr uint32_t kNoId = 0xffffffffu;
  struct Entry {
    uint16_t tag;
    uint16_t perm;
    uint32_t id;
  };
  const Entry entries[] = {{kUserObj, 7, kNoId},
                           {kUser, 1, static_cast<uint32_t>(uid)},
                           {kGroupObj, 0, kNoId},
                           {kMask, 1, kNoId},
                           {kOther, 0, kNoId}};
  unsigned char value[4 + sizeof(entries)];
  const uint32_t version = 2;
  std::memcpy(value, &version, 4);  // x86-64 and aarch64 are little-endian like the format
  std::memcpy(value + 4, entries, sizeof(entries));
  static_assert(sizeof(Entry) == 8);
  if (::setxattr(path.c_str(), "system.posix_acl_access", value, sizeof(value), 0) != 0) {
    return errnoStatus("cannot give uid " + std::to_string(uid) + " access by ACL to", path, errno);
  }
  return Status::ok();
}

Status ensureGroupDirectory(const std::string& path, gid_t gid, mode_t mode) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return Status::failedPrecondition("project directory " + path + " is not a directory");
    }
    return Status::ok();
  }
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    GPOOL_RETURN_IF_ERROR(makeDirs(path.substr(0, slash), 0755));
  }
  // Made 0700 first, so that nobody uses it before it has its group and mode. Another task's
  // supervisor may make it at the same time: both then set the same owner and mode.
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return errnoStatus("cannot create the project directory", path, errno);
  }
  // chown first: it clears the setgid bit that chmod then sets.
  if (::chown(path.c_str(), 0, gid) != 0) {
    return errnoStatus("cannot give the project directory to its group", path, errno);
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return errnoStatus("cannot set the project directory's mode", path, errno);
  }
  return Status::ok();
}

std::string preloadProblem(const std::string& library) {
  if (library.empty()) return "no interposer configured";
  if (::access(library.c_str(), R_OK) != 0) return library + ": " + std::strerror(errno);
  const char* program = ::access("/bin/true", X_OK) == 0 ? "/bin/true" : "/usr/bin/true";
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return std::string("cannot make a pipe: ") + std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  const std::string preload = "LD_PRELOAD=" + library;
  char* argv[] = {const_cast<char*>(program), nullptr};
  char* envp[] = {const_cast<char*>(preload.c_str()), nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program, &actions, nullptr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  std::string said;
  if (rc == 0) {
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || said.size() > 4096) break;
      said.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fds[0]);
  if (rc != 0) return std::string("cannot run ") + program + ": " + std::strerror(rc);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  while (!said.empty() && (said.back() == '\n' || said.back() == ' '))
    said.pop_back();
  if (!said.empty()) return said;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return std::string(program) + " preloaded with " + library + " did not exit cleanly (status " +
           std::to_string(status) + ")";
  }
  return "";
}

Status removeTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Status::ioError("cannot remove " + path + ": " + ec.message());
  return Status::ok();
}

Result<uint64_t> processStartTicks(pid_t pid) {
  auto stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return Status::notFound("no process " + std::to_string(pid));
  // The command name (field 2) may contain spaces and parentheses; fields after it start
  // after the last ')'.
  size_t close = stat->rfind(')');
  if (close == std::string::npos) {
    return Status::internal("malformed /proc/" + std::to_string(pid) + "/stat");
  }
  std::vector<std::string> fields = splitString(std::string_view(*stat).substr(close + 1), ' ');
  // fields[0] is field 3 (state); field 22 is fields[19].
  if (fields.size() < 20) {
    return Status::internal("short /proc/" + std::to_string(pid) + "/stat");
  }
  if (fields[0] == "Z" || fields[0] == "X") {
    return Status::notFound("process " + std::to_string(pid) + " is a zombie");
  }
  return std::stoull(fields[19]);
}

bool processMatches(pid_t pid, uint64_t start_ticks) {
  if (pid <= 0) return false;
  auto ticks = processStartTicks(pid);
  return ticks.ok() && *ticks == start_ticks;
}

int openPidFd(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

std::vector<std::string> splitString(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace gpool::agent
