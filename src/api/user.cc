#include "api/user.h"

#include <array>
#include <cctype>
#include <cmath>
#include <set>
#include <utility>

#include "api/json_reader.h"

namespace gpool::api {

namespace {

using nlohmann::json;

constexpr std::array<std::pair<Role, std::string_view>, 3> kRoles{{
    {Role::kUser, "user"},
    {Role::kGroupAdmin, "group-admin"},
    {Role::kAdmin, "admin"},
}};

bool isQosName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

void checkStatus(ObjectReader& r, std::string_view key, const Status& s) {
  if (!s.isOk()) r.fail(key, s.message());
}

}  // namespace

std::string_view roleName(Role role) {
  return enumName(role, kRoles);
}

Result<Role> parseRole(std::string_view text) {
  return parseEnumName(text, kRoles, "role");
}

Status validateAccountName(std::string_view name, std::string_view what) {
  if (name.empty()) return Status::invalidArgument(std::string(what) + " is empty");
  if (name.size() > 32) {
    return Status::invalidArgument(std::string(what) + " '" + std::string(name) +
                                   "' is longer than 32 characters");
  }
  bool ok = name.front() != '-';
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      ok = false;
    }
  }
  if (!ok) {
    return Status::invalidArgument(std::string(what) + " '" + std::string(name) +
                                   "' may only contain letters, digits, '_', '.' and '-', and "
                                   "may not start with '-'");
  }
  return Status::ok();
}

json toJson(const Quota& q) {
  json j{{"priority_weight", q.priority_weight}};
  putQuantity(j, "gpu_hours_period", Quantity::kDuration, static_cast<uint64_t>(q.period_seconds));
  putQuantity(j, "guaranteed_gpus", Quantity::kGpuAmount, q.guaranteed_gpus_milli);
  if (q.max_gpus_milli) putQuantity(j, "max_gpus", Quantity::kGpuAmount, *q.max_gpus_milli);
  if (q.gpu_hours) {
    // A whole number stays an integer in JSON ("gpu_hours": 100), as before fractions.
    const double h = *q.gpu_hours;
    if (h == std::floor(h) && h <= 1e15) {
      j["gpu_hours"] = static_cast<uint64_t>(h);
    } else {
      j["gpu_hours"] = h;
    }
  }
  if (q.max_memory_per_task_mib) {
    putQuantity(j, "max_memory_per_task", Quantity::kMemoryMiB, *q.max_memory_per_task_mib);
  }
  if (q.max_compute_milli) {
    putQuantity(j, "max_compute", Quantity::kGpuAmount, *q.max_compute_milli);
  }
  if (q.max_run_time_seconds) {
    putQuantity(j, "max_run_time", Quantity::kDuration,
                static_cast<uint64_t>(*q.max_run_time_seconds));
  }
  return j;
}

Status fromJson(const json& j, Quota* out, std::string_view path) {
  ObjectReader r(j, path);
  r.optionalQuantity("max_gpus", Quantity::kGpuAmount, &out->max_gpus_milli, true);
  r.optionalNumber("gpu_hours", &out->gpu_hours, 0, 1e9);
  r.quantity("gpu_hours_period", Quantity::kDuration, &out->period_seconds);
  r.optionalQuantity("max_memory_per_task", Quantity::kMemoryMiB, &out->max_memory_per_task_mib);
  r.optionalQuantity("max_compute", Quantity::kGpuAmount, &out->max_compute_milli, true);
  r.optionalQuantity("max_run_time", Quantity::kDuration, &out->max_run_time_seconds);
  r.integer("priority_weight", &out->priority_weight, Presence::kOptional, 0u, 1'000'000u);
  r.quantity("guaranteed_gpus", Quantity::kGpuAmount, &out->guaranteed_gpus_milli,
             Presence::kOptional, true);
  r.check(out->period_seconds > 0, "gpu_hours_period", "must be > 0");
  r.check(!out->max_gpus_milli || out->guaranteed_gpus_milli <= *out->max_gpus_milli,
          "guaranteed_gpus", "is larger than max_gpus");
  return r.finish();
}

json toJson(const User& u) {
  json j{{"name", u.name},
         {"uid", u.uid},
         {"groups", u.groups},
         {"role", roleName(u.role)},
         {"default_qos", u.default_qos}};
  if (u.quota) j["quota"] = toJson(*u.quota);
  return j;
}

Status fromJson(const json& j, User* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("name", &out->name, Presence::kRequired);
  r.integer("uid", &out->uid, Presence::kRequired, 0u, 4'294'967'294u);
  r.stringList("groups", &out->groups);
  r.parsed("role", &out->role, &parseRole);
  r.string("default_qos", &out->default_qos);
  r.optionalObject("quota", &out->quota);
  if (r.ok()) {
    checkStatus(r, "name", validateAccountName(out->name, "user name"));
    std::set<std::string_view> seen;
    for (size_t i = 0; i < out->groups.size(); ++i) {
      std::string key = "groups[" + std::to_string(i) + "]";
      checkStatus(r, key, validateAccountName(out->groups[i], "group name"));
      r.check(seen.insert(out->groups[i]).second, key,
              "group '" + out->groups[i] + "' is listed twice");
    }
    r.check(out->default_qos.empty() || isQosName(out->default_qos), "default_qos",
            "is not a valid QoS name");
  }
  return r.finish();
}

json toJson(const Group& g) {
  json j{{"name", g.name}, {"gid", g.gid}, {"project_dir", g.project_dir}};
  if (g.quota) j["quota"] = toJson(*g.quota);
  return j;
}

Status fromJson(const json& j, Group* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("name", &out->name, Presence::kRequired);
  r.integer("gid", &out->gid, Presence::kRequired, 0u, 4'294'967'294u);
  r.string("project_dir", &out->project_dir);
  r.optionalObject("quota", &out->quota);
  if (r.ok()) {
    checkStatus(r, "name", validateAccountName(out->name, "group name"));
    r.check(out->project_dir.empty() || out->project_dir.front() == '/', "project_dir",
            "must be an absolute path");
  }
  return r.finish();
}

json toJson(const Qos& q) {
  json j{{"name", q.name},
         {"description", q.description},
         {"priority", q.priority},
         {"preemptible", q.preemptible}};
  if (q.grace_time_seconds) {
    putQuantity(j, "grace_time", Quantity::kDuration, static_cast<uint64_t>(*q.grace_time_seconds));
  }
  if (q.max_gpus_per_user_milli) {
    putQuantity(j, "max_gpus_per_user", Quantity::kGpuAmount, *q.max_gpus_per_user_milli);
  }
  if (q.max_wall_time_seconds) {
    putQuantity(j, "max_wall_time", Quantity::kDuration,
                static_cast<uint64_t>(*q.max_wall_time_seconds));
  }
  return j;
}

Status fromJson(const json& j, Qos* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("name", &out->name, Presence::kRequired);
  r.string("description", &out->description);
  r.integer("priority", &out->priority, Presence::kOptional, 0u, 1'000'000u);
  r.boolean("preemptible", &out->preemptible);
  r.optionalQuantity("max_gpus_per_user", Quantity::kGpuAmount, &out->max_gpus_per_user_milli,
                     true);
  r.optionalQuantity("max_wall_time", Quantity::kDuration, &out->max_wall_time_seconds);
  r.optionalQuantity("grace_time", Quantity::kDuration, &out->grace_time_seconds);
  r.check(isQosName(out->name), "name",
          "must have 1 to 64 letters, digits, '_', '.' or '-', got '" + out->name + "'");
  r.check(!out->max_wall_time_seconds || *out->max_wall_time_seconds > 0, "max_wall_time",
          "must be > 0");
  return r.finish();
}

}  // namespace gpool::api
