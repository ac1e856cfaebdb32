#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

// The node's lease as the agent last renewed it, shared with every task's supervisor through a
// small file that both map (docs/agent-protocol.md, "Leases and fencing"). The agent writes the
// moment its lease ends; each supervisor of a fenced task reads it and stops its task once that
// moment has passed, whether or not the agent is still alive. So a requeued job cannot run in
// two places even when its old agent is killed or stopped.
//
// Time is CLOCK_BOOTTIME (bootTimeMicros): one clock for every process of the server, which
// keeps counting through a suspend (a task frozen by a suspend must not wake up with a lease
// that the controller has long given away).
//
// The file is created once with its blocks allocated (posix_fallocate) and then only changed in
// place through the mapping, so a renewal needs no disk space: a full disk cannot make the
// agent lose its lease (and fence every task) while it is connected.
//
// Thread-safety: the values are atomics in shared memory; one writer (the agent), any number of
// readers in any process.
namespace gpool::agent {

// CLOCK_BOOTTIME in microseconds.
int64_t bootTimeMicros();

class LeaseFile {
 public:
  // What the agent granted its tasks.
  struct Terms {
    int64_t expires_boot_us = 0;  // the lease ends at this bootTimeMicros(); 0: never granted
    int64_t fence_grace_ms = 0;   // SIGTERM at the end, SIGKILL this much later
  };

  // Opens the file at `path` for renewing (the agent), creating it (mode 0644, blocks
  // allocated) when missing. An existing lease is kept: supervisors of a restarted agent keep
  // the lease the old one granted. IoError naming the path when it cannot be made.
  static Result<LeaseFile> create(const std::string& path);
  // Opens an existing lease file read-only (a supervisor). NotFound when missing; IoError when
  // it is not a lease file.
  static Result<LeaseFile> open(const std::string& path);

  LeaseFile(LeaseFile&& other) noexcept;
  LeaseFile& operator=(LeaseFile&& other) noexcept;
  LeaseFile(const LeaseFile&) = delete;
  LeaseFile& operator=(const LeaseFile&) = delete;
  ~LeaseFile();

  // Sets the terms. REQUIRES: opened with create().
  void renew(const Terms& terms);
  Terms read() const;

  const std::string& path() const { return path_; }

 private:
  struct Record;
  LeaseFile(std::string path, Record* record) : path_(std::move(path)), record_(record) {}

  std::string path_;
  Record* record_ = nullptr;  // the mapping; null when moved from
};

}  // namespace gpool::agent
