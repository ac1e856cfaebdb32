#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

// Small POSIX helpers shared by the launcher and the supervisor. All return Status/Result with
// the path and errno text in the message; none throws. Thread-safe (no shared state).
namespace gpool::agent {

// Writes `contents` to `path` durably: a temporary file in the same directory, fsync, rename
// over `path`, then fsync of the directory. A crash leaves either the old or the new file.
Status writeFileDurably(const std::string& path, std::string_view contents, mode_t mode = 0644);

// Writes without fsync (write-temp + rename): atomic for readers, not durable across a crash.
Status writeFileAtomically(const std::string& path, std::string_view contents, mode_t mode = 0644);

// Writes `contents` to an existing file (cgroup and proc files) in one write(2).
Status writeExistingFile(const std::string& path, std::string_view contents);

// The whole file. NotFound when it does not exist.
Result<std::string> readFile(const std::string& path);

// mkdir -p with `mode` for the directories it creates.
Status makeDirs(const std::string& path, mode_t mode = 0755);

// Lets one other user, `uid`, reach the files in directory `path` by name (search permission)
// through a POSIX ACL (user::rwx, user:<uid>:--x, group::---, mask::--x, other::---), while
// only the directory's owner may list or change it. An error naming the path when the
// filesystem keeps no ACLs (EOPNOTSUPP) or the call fails.
Status grantSearchToUser(const std::string& path, uid_t uid);

// A group's shared directory: when `path` does not exist, creates it (parents root's, 0755)
// owned by root:`gid` with `mode` (e.g. 02770: setgid, so files made in it belong to the
// group). An existing directory is left as it is (its admins may have changed it); an existing
// non-directory is FailedPrecondition.
Status ensureGroupDirectory(const std::string& path, gid_t gid, mode_t mode);

// Whether a program preloaded with the shared library `library` (LD_PRELOAD) starts as a task
// would: runs /bin/true so and returns what went wrong (the dynamic loader's complaint, e.g.
// "cannot be preloaded (invalid ELF header)", a missing file, a failed start), or "" when it
// loaded cleanly. Runs a child process; call it off hot paths.
std::string preloadProblem(const std::string& library);

// Removes `path` and everything under it; OK when it does not exist.
Status removeTree(const std::string& path);

// The start time of process `pid` in clock ticks since boot (/proc/<pid>/stat field 22), or
// NotFound when no such process exists. (pid, start ticks) names a process uniquely across pid
// reuse.
Result<uint64_t> processStartTicks(pid_t pid);

// True when `pid` is alive and started at `start_ticks` (and is not a zombie).
bool processMatches(pid_t pid, uint64_t start_ticks);

// "<what>: <path>: <strerror(err)>".
Status errnoStatus(std::string_view what, const std::string& path, int err);

// Opens a pidfd for `pid` (pidfd_open(2)); -1 with errno on failure. The fd becomes readable
// when the process exits, which lets a non-parent wait for a process without polling.
int openPidFd(pid_t pid);

// Splits on `sep`, dropping empty pieces.
std::vector<std::string> splitString(std::string_view text, char sep);

}  // namespace gpool::agent
