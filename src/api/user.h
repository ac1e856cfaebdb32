#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "common/status.h"

// Who may use the pool and how much: users, groups, their quotas, and QoS levels.
//
// Thread-safety: plain values without shared state; every function here is re-entrant and may
// be called from any thread on objects no other thread is writing.
namespace gpool::api {

// What a user may do beyond their own jobs.
enum class Role {
  kUser,        // "user": submit and manage own jobs
  kGroupAdmin,  // "group-admin": also manage the jobs and quotas of the groups they belong to
  kAdmin,       // "admin": everything (drain nodes, cancel any job, edit users and QoS)
};
std::string_view roleName(Role role);
Result<Role> parseRole(std::string_view text);

// Limits for a user or a group. An unset limit means no limit; a limit of zero forbids use
// (e.g. max_gpus_milli = 0: no GPUs at all). GPU amounts are in thousandths of a GPU, so a
// limit can count slices ("1.5" GPUs).
struct Quota {
  std::optional<uint64_t> max_gpus_milli;           // GPUs held at once
  std::optional<double> gpu_hours;                  // GPU-hours per period (0.5 is fine)
  int64_t period_seconds = 30 * 24 * 3600;          // the GPU-hour accounting period
  std::optional<uint64_t> max_memory_per_task_mib;  // GPU memory per task
  std::optional<uint64_t> max_compute_milli;        // sum of compute shares held at once
  std::optional<int64_t> max_run_time_seconds;      // continuous run time of one job
  uint32_t priority_weight = 1;                     // fair-share weight, [0, 1000000]
  uint64_t guaranteed_gpus_milli = 0;               // guaranteed (others may borrow it)
  bool operator==(const Quota&) const = default;
};

// A Unix user known to the pool. Jobs run as this user's uid, never as root.
struct User {
  std::string name;  // the Unix user name
  uint32_t uid = 0;
  std::vector<std::string> groups;  // the pool groups they belong to; the first is the default
  Role role = Role::kUser;
  std::string default_qos;     // empty: the pool's default
  std::optional<Quota> quota;  // unset: only the groups' quotas apply
  bool operator==(const User&) const = default;
};

// A group of users that shares a quota and, optionally, a project directory on the servers.
struct Group {
  std::string name;  // the Unix group name
  uint32_t gid = 0;
  std::string project_dir;  // absolute; empty: none
  std::optional<Quota> quota;
  bool operator==(const Group&) const = default;
};

// A quality-of-service level jobs ask for by name.
struct Qos {
  std::string name;  // [A-Za-z0-9_.-], 1 to 64 characters
  std::string description;
  uint32_t priority = 0;     // higher goes first, [0, 1000000]
  bool preemptible = false;  // jobs in this QoS may be preempted for higher-priority work
  std::optional<uint64_t> max_gpus_per_user_milli;
  std::optional<int64_t> max_wall_time_seconds;  // also the default time limit
  // Between the preemption (or time-limit) signal and the kill; 0: killed at once. Unset: the
  // controller's configured preemption grace ([scheduler] preempt_grace) and the agent's
  // default at the time limit, as for a level only configured in gpoold.
  std::optional<int64_t> grace_time_seconds;
  bool operator==(const Qos&) const = default;
};

// User and group names: letters, digits, '_', '.', '-', not starting with '-', 1 to 32
// characters. `what` is "user name" or "group name".
Status validateAccountName(std::string_view name, std::string_view what);

nlohmann::json toJson(const Quota& quota);
nlohmann::json toJson(const User& user);
nlohmann::json toJson(const Group& group);
nlohmann::json toJson(const Qos& qos);
Status fromJson(const nlohmann::json& j, Quota* out, std::string_view path = "quota");
Status fromJson(const nlohmann::json& j, User* out, std::string_view path = "user");
Status fromJson(const nlohmann::json& j, Group* out, std::string_view path = "group");
Status fromJson(const nlohmann::json& j, Qos* out, std::string_view path = "qos");

}  // namespace gpool::api
