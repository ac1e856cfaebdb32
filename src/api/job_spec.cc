#include "api/job_spec.h"

#include <array>
#include <cctype>
#include <set>
#include <utility>

#include "api/json_reader.h"
#include "common/container_spec.h"
#include "common/units.h"

namespace gpool::api {

namespace {

using nlohmann::json;

constexpr std::array<std::pair<DependencyKind, std::string_view>, 3> kDependencyKinds{{
    {DependencyKind::kAfterOk, "afterok"},
    {DependencyKind::kAfterAny, "afterany"},
    {DependencyKind::kAfterNotOk, "afternotok"},
}};

// Strict decimal of at most 7 digits (array indices and limits are below 10^7).
bool parseSmallUint(std::string_view s, uint32_t* out) {
  if (s.empty() || s.size() > 7) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  *out = v;
  return true;
}

bool parseJobId(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return v > 0;
}

bool hasControlChar(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

bool isEnvName(std::string_view s) {
  if (s.empty() || s.size() > 256) return false;
  if (std::isdigit(static_cast<unsigned char>(s.front()))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool isIdentifier(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

std::string quote(std::string_view s) {
  return "'" + std::string(s) + "'";
}

}  // namespace

// ---- arrays ----

std::vector<uint32_t> ArraySpec::indices() const {
  std::vector<uint32_t> out;
  for (const ArrayRange& r : ranges) {
    if (r.step == 0 || r.last < r.first) continue;
    for (uint64_t i = r.first; i <= r.last; i += r.step)
      out.push_back(static_cast<uint32_t>(i));
  }
  return out;
}

size_t ArraySpec::count() const {
  size_t n = 0;
  for (const ArrayRange& r : ranges) {
    if (r.step == 0 || r.last < r.first) continue;
    n += (r.last - r.first) / r.step + 1;
  }
  return n;
}

Result<ArraySpec> parseArraySpec(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::invalidArgument("array spec " + quote(text) + " " + std::string(why) +
                                   " (e.g. 0-31, 1,3,5-7, 0-15:4 or 0-31%4)");
  };
  if (text.empty()) return bad("is empty");
  ArraySpec spec;
  std::string_view body = text;
  size_t percent = text.find('%');
  if (percent != std::string_view::npos) {
    body = text.substr(0, percent);
    if (!parseSmallUint(text.substr(percent + 1), &spec.max_parallel)) {
      return bad("has a malformed limit after '%'");
    }
    if (spec.max_parallel == 0) return bad("limits parallel elements to 0");
  }
  size_t total = 0;
  std::set<uint32_t> seen;
  size_t pos = 0;
  while (true) {
    size_t comma = body.find(',', pos);
    std::string_view piece =
        body.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (piece.empty()) return bad("has an empty element");
    ArrayRange range;
    std::string_view bounds = piece;
    size_t colon = piece.find(':');
    if (colon != std::string_view::npos) {
      bounds = piece.substr(0, colon);
      if (!parseSmallUint(piece.substr(colon + 1), &range.step)) {
        return bad("has a malformed step in " + quote(piece));
      }
      if (range.step == 0) return bad("has a zero step in " + quote(piece));
    }
    size_t dash = bounds.find('-');
    if (dash == std::string_view::npos) {
      if (colon != std::string_view::npos) return bad("has a step without a range");
      if (!parseSmallUint(bounds, &range.first))
        return bad("has a malformed index " + quote(bounds));
      range.last = range.first;
    } else {
      if (!parseSmallUint(bounds.substr(0, dash), &range.first) ||
          !parseSmallUint(bounds.substr(dash + 1), &range.last)) {
        return bad("has a malformed range " + quote(bounds));
      }
      if (range.last < range.first) return bad("has a reversed range " + quote(bounds));
    }
    if (range.last > kMaxArrayIndex) {
      return bad("has an index above " + std::to_string(kMaxArrayIndex));
    }
    total += (range.last - range.first) / range.step + 1;
    if (total > kMaxArrayTasks) {
      return bad("has more than " + std::to_string(kMaxArrayTasks) + " elements");
    }
    for (uint64_t i = range.first; i <= range.last; i += range.step) {
      if (!seen.insert(static_cast<uint32_t>(i)).second) {
        return bad("lists index " + std::to_string(i) + " twice");
      }
    }
    spec.ranges.push_back(range);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return spec;
}

std::string formatArraySpec(const ArraySpec& spec) {
  std::string out;
  for (const ArrayRange& r : spec.ranges) {
    if (!out.empty()) out += ",";
    out += std::to_string(r.first);
    if (r.last != r.first || r.step != 1) out += "-" + std::to_string(r.last);
    if (r.step != 1) out += ":" + std::to_string(r.step);
  }
  if (spec.max_parallel != 0) out += "%" + std::to_string(spec.max_parallel);
  return out;
}

// ---- dependencies ----

std::string_view dependencyKindName(DependencyKind kind) {
  return enumName(kind, kDependencyKinds);
}

Result<DependencyKind> parseDependencyKind(std::string_view text) {
  return parseEnumName(text, kDependencyKinds, "dependency kind");
}

Result<std::vector<Dependency>> parseDependencyList(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::invalidArgument("dependency list " + quote(text) + " " + std::string(why) +
                                   " (e.g. afterok:12:13,afterany:14)");
  };
  std::vector<Dependency> out;
  if (text.empty()) return bad("is empty");
  size_t pos = 0;
  while (true) {
    size_t comma = text.find(',', pos);
    std::string_view piece =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    size_t colon = piece.find(':');
    if (colon == std::string_view::npos) return bad("has " + quote(piece) + " without a job id");
    Result<DependencyKind> kind = parseDependencyKind(piece.substr(0, colon));
    if (!kind.ok()) return bad("has " + kind.status().message());
    std::string_view ids = piece.substr(colon + 1);
    size_t id_pos = 0;
    while (true) {
      size_t next = ids.find(':', id_pos);
      std::string_view id_text = ids.substr(
          id_pos, next == std::string_view::npos ? std::string_view::npos : next - id_pos);
      Dependency dep;
      dep.kind = *kind;
      if (!parseJobId(id_text, &dep.job_id)) return bad("has a bad job id " + quote(id_text));
      out.push_back(dep);
      if (next == std::string_view::npos) break;
      id_pos = next + 1;
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::string formatDependencyList(const std::vector<Dependency>& deps) {
  std::string out;
  for (const Dependency& d : deps) {
    if (!out.empty()) out += ",";
    out += std::string(dependencyKindName(d.kind)) + ":" + std::to_string(d.job_id);
  }
  return out;
}

// ---- resources ----

PerGpuNeed perGpuNeed(const TaskResources& res, uint64_t gpu_memory_mib) {
  PerGpuNeed need;
  if (res.gpus_milli == 0) return need;
  if (res.gpus_milli < 1000) {
    need.gpu_count = 1;
    // Rounded down: a slice never exceeds its fraction of the GPU.
    need.memory_mib =
        res.gpu_memory_mib != 0 ? res.gpu_memory_mib : gpu_memory_mib * res.gpus_milli / 1000;
    need.compute_milli = res.gpu_compute_milli != 0 ? res.gpu_compute_milli : res.gpus_milli;
    return need;
  }
  need.gpu_count = res.gpus_milli / 1000;
  need.exclusive = res.gpu_memory_mib == 0 && res.gpu_compute_milli == 0;
  need.memory_mib = res.gpu_memory_mib != 0 ? res.gpu_memory_mib : gpu_memory_mib;
  need.compute_milli = res.gpu_compute_milli != 0 ? res.gpu_compute_milli : kComputeWhole;
  return need;
}

// ---- validation ----

Status validateJobSpec(const JobSpec& spec, std::string_view path) {
  auto bad = [&](std::string_view field, std::string_view why) {
    std::string where =
        path.empty() ? std::string(field) : std::string(path) + "." + std::string(field);
    return Status::invalidArgument(where + ": " + std::string(why));
  };
  if (spec.name.size() > 256) return bad("name", "is longer than 256 characters");
  if (hasControlChar(spec.name)) return bad("name", "contains a control character");

  if (spec.command.empty() && !spec.interactive) {
    return bad("command", "must not be empty (only interactive jobs may omit the command)");
  }
  if (spec.command.size() > kMaxCommandArgs) {
    return bad("command", "has more than " + std::to_string(kMaxCommandArgs) + " arguments");
  }
  for (size_t i = 0; i < spec.command.size(); ++i) {
    if (spec.command[i].find('\0') != std::string::npos) {
      return bad("command[" + std::to_string(i) + "]", "contains a NUL character");
    }
  }
  if (!spec.command.empty() && spec.command.front().empty()) {
    return bad("command[0]", "the program name is empty");
  }
  if (spec.env.size() > kMaxEnvVars) {
    return bad("env", "has more than " + std::to_string(kMaxEnvVars) + " variables");
  }
  for (const auto& [key, value] : spec.env) {
    if (!isEnvName(key)) {
      return bad("env." + key,
                 "is not a valid variable name (letters, digits and '_', not "
                 "starting with a digit)");
    }
    if (value.find('\0') != std::string::npos) {
      return bad("env." + key, "contains a NUL character");
    }
  }
  if (!spec.working_dir.empty() && spec.working_dir.front() != '/') {
    return bad("working_dir", "must be an absolute path, got " + quote(spec.working_dir));
  }
  if (spec.working_dir.find('\0') != std::string::npos) {
    return bad("working_dir", "contains a NUL character");
  }
  if (!spec.image.empty()) {
    if (Status st = checkImageName(spec.image); !st.isOk()) return bad("image", st.message());
  }
  if (spec.mounts.size() > 64) return bad("mounts", "has more than 64 mounts");
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    Result<BindMount> m = parseBindMount(spec.mounts[i]);
    if (!m.ok()) return bad("mounts[" + std::to_string(i) + "]", m.status().message());
  }
  if (!spec.mounts.empty() && spec.image.empty()) {
    return bad("mounts", "need an image (mounts go into the job's container)");
  }

  const TaskResources& res = spec.resources;
  const uint32_t gpus = res.gpus_milli;
  if (gpus > kMaxGpusPerTask * 1000 || (gpus > 1000 && gpus % 1000 != 0)) {
    return bad("resources.gpus",
               "must be 0, a slice below 1 or whole GPUs, got " + formatGpuCount(gpus));
  }
  if (gpus == 0 && res.gpu_memory_mib != 0) {
    return bad("resources.gpu_memory", "needs GPUs (gpus > 0)");
  }
  if (gpus == 0 && res.gpu_compute_milli != 0) {
    return bad("resources.gpu_compute", "needs GPUs (gpus > 0)");
  }
  if (res.gpu_compute_milli > kComputeWhole) {
    return bad("resources.gpu_compute", "is above a whole GPU (1000)");
  }
  if (res.gpu_memory_mib > kMaxMemoryMiB) return bad("resources.gpu_memory", "is too large");
  if (res.ram_mib > kMaxMemoryMiB) return bad("resources.ram", "is too large");
  if (res.cpus_milli == 0) return bad("resources.cpus", "must be > 0");
  if (res.cpus_milli > 1'000'000'000) return bad("resources.cpus", "is too large");

  if (spec.tasks < 1 || spec.tasks > kMaxTasksPerJob) {
    return bad("tasks", "is out of range [1, " + std::to_string(kMaxTasksPerJob) + "], got " +
                            std::to_string(spec.tasks));
  }
  if (spec.nodes > spec.tasks) {
    return bad("nodes", "is larger than tasks (" + std::to_string(spec.nodes) + " > " +
                            std::to_string(spec.tasks) + ")");
  }

  const Constraints& c = spec.constraints;
  for (size_t i = 0; i < c.gpu_models.size(); ++i) {
    if (c.gpu_models[i].empty() || c.gpu_models[i].size() > 256) {
      return bad("constraints.gpu_models[" + std::to_string(i) + "]",
                 "must have 1 to 256 characters");
    }
  }
  if (c.min_gpu_memory_mib > kMaxMemoryMiB) {
    return bad("constraints.min_gpu_memory", "is too large");
  }
  for (const auto& [key, value] : c.node_labels) {
    Status s = validateLabelKey(key);
    if (!s.isOk()) return bad("constraints.node_labels", s.message());
  }
  for (size_t i = 0; i < c.datasets.size(); ++i) {
    if (c.datasets[i].empty() || c.datasets[i].size() > 256) {
      return bad("constraints.datasets[" + std::to_string(i) + "]",
                 "must have 1 to 256 characters");
    }
  }

  if (spec.time_limit_seconds < 0 || spec.time_limit_seconds > kMaxDurationSeconds) {
    return bad("time_limit", "is out of range (0 to 365 days)");
  }
  if (!spec.qos.empty() && !isIdentifier(spec.qos)) {
    return bad("qos", "is not a valid QoS name, got " + quote(spec.qos));
  }
  if (spec.array) {
    if (spec.interactive) return bad("array", "interactive jobs cannot be arrays");
    // Specs built in code get the same checks as parsed ones.
    Result<ArraySpec> again = parseArraySpec(formatArraySpec(*spec.array));
    if (!again.ok()) return bad("array", again.status().message());
    if (!(*again == *spec.array)) return bad("array", "is not in canonical form");
  }
  std::set<std::pair<DependencyKind, uint64_t>> deps;
  for (size_t i = 0; i < spec.dependencies.size(); ++i) {
    const Dependency& d = spec.dependencies[i];
    std::string field = "dependencies[" + std::to_string(i) + "]";
    if (d.job_id == 0) return bad(field + ".job_id", "must be > 0");
    if (!deps.insert({d.kind, d.job_id}).second) {
      return bad(field, "repeats " + formatDependencyList({d}));
    }
  }
  return Status::ok();
}

// ---- JSON ----

json toJson(const TaskResources& res) {
  json j = json::object();
  putQuantity(j, "gpus", Quantity::kGpuCount, res.gpus_milli);
  putQuantity(j, "gpu_memory", Quantity::kMemoryMiB, res.gpu_memory_mib);
  putQuantity(j, "gpu_compute", Quantity::kComputeShare, res.gpu_compute_milli);
  putQuantity(j, "cpus", Quantity::kCpuMillis, res.cpus_milli);
  putQuantity(j, "ram", Quantity::kMemoryMiB, res.ram_mib);
  return j;
}

Status fromJson(const json& j, TaskResources* out, std::string_view path) {
  ObjectReader r(j, path);
  r.quantity("gpus", Quantity::kGpuCount, &out->gpus_milli, Presence::kOptional, true);
  r.quantity("gpu_memory", Quantity::kMemoryMiB, &out->gpu_memory_mib);
  r.quantity("gpu_compute", Quantity::kComputeShare, &out->gpu_compute_milli, Presence::kOptional,
             true);
  r.quantity("cpus", Quantity::kCpuMillis, &out->cpus_milli);
  r.quantity("ram", Quantity::kMemoryMiB, &out->ram_mib);
  return r.finish();
}

json toJson(const Constraints& c) {
  json j{{"gpu_models", c.gpu_models}, {"node_labels", c.node_labels}, {"datasets", c.datasets}};
  putQuantity(j, "min_gpu_memory", Quantity::kMemoryMiB, c.min_gpu_memory_mib);
  if (c.min_compute_capability) {
    j["min_compute_capability"] = formatComputeCapability(*c.min_compute_capability);
  }
  if (c.min_cuda) j["min_cuda"] = formatCudaVersion(*c.min_cuda);
  return j;
}

Status fromJson(const json& j, Constraints* out, std::string_view path) {
  ObjectReader r(j, path);
  r.stringList("gpu_models", &out->gpu_models);
  r.optionalParsed("min_compute_capability", &out->min_compute_capability, &parseComputeCapability);
  r.optionalParsed("min_cuda", &out->min_cuda, &parseCudaVersion);
  r.quantity("min_gpu_memory", Quantity::kMemoryMiB, &out->min_gpu_memory_mib);
  r.stringMap("node_labels", &out->node_labels);
  r.stringList("datasets", &out->datasets);
  return r.finish();
}

json toJson(const Dependency& d) {
  return json{{"kind", dependencyKindName(d.kind)}, {"job_id", d.job_id}};
}

Status fromJson(const json& j, Dependency* out, std::string_view path) {
  ObjectReader r(j, path);
  r.parsed("kind", &out->kind, &parseDependencyKind, Presence::kRequired);
  r.integer("job_id", &out->job_id, Presence::kRequired, uint64_t{1},
            static_cast<uint64_t>(INT64_MAX));
  return r.finish();
}

json toJson(const JobSpec& spec) {
  json deps = json::array();
  for (const Dependency& d : spec.dependencies)
    deps.push_back(toJson(d));
  json j{{"name", spec.name},
         {"command", spec.command},
         {"env", spec.env},
         {"working_dir", spec.working_dir},
         {"resources", toJson(spec.resources)},
         {"tasks", spec.tasks},
         {"nodes", spec.nodes},
         {"constraints", toJson(spec.constraints)},
         {"qos", spec.qos},
         {"preemptible", spec.preemptible},
         {"interactive", spec.interactive},
         {"dependencies", std::move(deps)}};
  putQuantity(j, "time_limit", Quantity::kDuration, static_cast<uint64_t>(spec.time_limit_seconds));
  if (spec.array) j["array"] = formatArraySpec(*spec.array);
  if (!spec.image.empty()) j["image"] = spec.image;
  if (!spec.mounts.empty()) j["mounts"] = spec.mounts;
  return j;
}

Status fromJson(const json& j, JobSpec* out, std::string_view path) {
  ObjectReader r(j, path);
  r.string("name", &out->name);
  r.stringList("command", &out->command);
  r.stringMap("env", &out->env);
  r.string("working_dir", &out->working_dir);
  r.object("resources", &out->resources);
  r.integer("tasks", &out->tasks, Presence::kOptional, 1u, kMaxTasksPerJob);
  r.integer("nodes", &out->nodes, Presence::kOptional, 0u, kMaxTasksPerJob);
  r.object("constraints", &out->constraints);
  r.quantity("time_limit", Quantity::kDuration, &out->time_limit_seconds);
  r.string("qos", &out->qos);
  r.boolean("preemptible", &out->preemptible);
  r.boolean("interactive", &out->interactive);
  r.optionalParsed("array", &out->array, &parseArraySpec);
  r.objectList("dependencies", &out->dependencies, Presence::kOptional, 1024);
  r.string("image", &out->image);
  r.stringList("mounts", &out->mounts);
  GPOOL_RETURN_IF_ERROR(r.finish());
  return validateJobSpec(*out, path);
}

}  // namespace gpool::api
