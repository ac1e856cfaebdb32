#include "cli/submit_options.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "api/node.h"
#include "common/container_spec.h"
#include "common/units.h"

namespace gpool::cli {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string> splitComma(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    out.emplace_back(trim(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

// Levenshtein distance, for "did you mean" on a mistyped flag.
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string unknownSubmitFlag(std::string_view flag) {
  std::string msg = "unknown flag '--" + std::string(flag) + "'";
  const SubmitFlagDef* best = nullptr;
  size_t best_distance = 3;
  for (const SubmitFlagDef& def : submitFlagDefs()) {
    size_t d = editDistance(flag, def.name);
    if (d < best_distance) {
      best_distance = d;
      best = &def;
    }
  }
  if (best) return msg + " (did you mean '--" + best->name + "'?)";
  return msg + " (see gpool submit --help)";
}

namespace {

// The last occurrence of a single-valued flag.
const FlagValue* last(const SubmitFlags& flags, const std::string& name) {
  auto it = flags.values.find(name);
  if (it == flags.values.end() || it->second.empty()) return nullptr;
  return &it->second.back();
}

const std::vector<FlagValue>& all(const SubmitFlags& flags, const std::string& name) {
  static const std::vector<FlagValue> kNone;
  auto it = flags.values.find(name);
  return it == flags.values.end() ? kNone : it->second;
}

Status at(const FlagValue& v, const std::string& flag, const Status& s) {
  if (v.where == "--" + flag) return s.withContext(v.where);
  return s.withContext(v.where + ": --" + flag);
}

Status bad(const FlagValue& v, const std::string& flag, const std::string& message) {
  return at(v, flag, Status::invalidArgument(message));
}

Result<uint64_t> parseJobIdText(const FlagValue& v, const std::string& flag,
                                std::string_view text) {
  uint64_t id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || id == 0) {
    return bad(v, flag,
               "'" + std::string(text) + "' is not a job id (a positive integer such as 42)");
  }
  return id;
}

Result<uint32_t> parseCount(const FlagValue& v, const std::string& flag, uint32_t max) {
  uint32_t n = 0;
  const std::string& t = v.value;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || n == 0 || n > max) {
    return bad(
        v, flag,
        "'" + t + "' is not a count in [1, " + std::to_string(max) + "] (e.g. --" + flag + " 2)");
  }
  return n;
}

}  // namespace

const std::vector<SubmitFlagDef>& submitFlagDefs() {
  static const std::vector<SubmitFlagDef> kDefs = {
      {"gpus", "N", false, "GPUs per task: 1, 2 (whole GPUs) or 0.25 (a slice of one GPU)"},
      {"gpu-mem", "SIZE", false, "GPU memory per GPU, e.g. 20G (makes whole GPUs shared slices)"},
      {"gpu-compute", "SHARE", false, "compute share per GPU, e.g. 30% or 0.3"},
      {"gpu-model", "MODEL", true,
       "only GPUs of this model (exact name, e.g. A100); repeat or comma-separate for any of "
       "several"},
      {"min-cc", "X.Y", false, "minimum CUDA compute capability, e.g. 8.0"},
      {"min-cuda", "X.Y", false, "minimum CUDA version the driver supports, e.g. 12.2"},
      {"time", "DURATION", false, "time limit: 4h, 90m, 1-00:00:00 (default: the QoS maximum)"},
      {"cpus", "N", false, "CPUs per task: 8, 0.5 or 500m (default 1)"},
      {"mem", "SIZE", false, "RAM per task, e.g. 64G (default: the site's default)"},
      {"tasks", "N", false, "number of tasks (default 1)"},
      {"nodes", "N", false, "spread the tasks over exactly N nodes"},
      {"qos", "NAME", false, "quality of service (default: your default QoS)"},
      {"preemptible", nullptr, false, "the job may be preempted for other work"},
      {"array", "SPEC", false, "job array: 0-99%8 (100 jobs, 8 at once), 1,3,5-7, 0-15:4"},
      {"after", "JOB", true,
       "start after JOB completed successfully (afterok); comma-separate or repeat"},
      {"after-any", "JOB", true, "start after JOB ended in any state (afterany)"},
      {"dependency", "LIST", true, "Slurm's form: afterok:12:13,afterany:14,afternotok:15"},
      {"name", "NAME", false, "job name (default: the script's or command's file name)"},
      {"group", "GROUP", false, "the group whose quota is charged"},
      {"workdir", "DIR", false, "working directory (default: the current directory)"},
      {"export", "VAR[=VALUE]", true,
       "set VAR in the job's environment; without a value, copy it from yours"},
      {"image", "IMAGE", false,
       "run each task in a container of this image (a node's local image or an absolute root "
       "filesystem directory; docs/containers.md)"},
      {"mount", "SRC:DST[:ro]", true, "bind-mount SRC into the container at DST; repeat"},
  };
  return kDefs;
}

const SubmitFlagDef* findSubmitFlag(std::string_view name) {
  for (const SubmitFlagDef& def : submitFlagDefs()) {
    if (name == def.name) return &def;
  }
  return nullptr;
}

void SubmitFlags::add(const std::string& name, FlagValue value) {
  std::vector<FlagValue>& v = values[name];
  const SubmitFlagDef* def = findSubmitFlag(name);
  if (def && !def->repeatable) v.clear();
  v.push_back(std::move(value));
}

void SubmitFlags::overrideWith(const SubmitFlags& overrides) {
  for (const auto& [name, occurrences] : overrides.values) {
    if (!occurrences.empty()) values[name] = occurrences;
  }
}

Result<std::vector<std::string>> splitDirectiveWords(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      ++i;
    } else if (c == '#' && !in_word) {
      break;  // a trailing comment
    } else if (c == '\'' || c == '"') {
      size_t close = text.find(c, i + 1);
      if (c == '"') {
        // Double quotes allow \" inside.
        std::string quoted;
        size_t j = i + 1;
        for (; j < text.size() && text[j] != '"'; ++j) {
          if (text[j] == '\\' && j + 1 < text.size()) ++j;
          quoted += text[j];
        }
        close = j < text.size() ? j : std::string_view::npos;
        if (close == std::string_view::npos) {
          return Status::invalidArgument("unterminated \" quote");
        }
        word += quoted;
      } else {
        if (close == std::string_view::npos) {
          return Status::invalidArgument("unterminated ' quote");
        }
        word += text.substr(i + 1, close - i - 1);
      }
      in_word = true;
      i = close + 1;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[i + 1];
      in_word = true;
      i += 2;
    } else {
      word += c;
      in_word = true;
      ++i;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

Result<SubmitFlags> parseDirectives(std::string_view script, std::string_view path) {
  SubmitFlags flags;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < script.size()) {
    size_t end = script.find('\n', pos);
    if (end == std::string_view::npos) end = script.size();
    std::string_view line = script.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    const std::string where = std::string(path) + ":" + std::to_string(line_no);
    std::string_view trimmed = trim(line);
    if (trimmed.empty()) continue;
    if (line.rfind("#GPOOL", 0) == 0 &&
        (line.size() == 6 || line[6] == ' ' || line[6] == '\t' || line[6] == '\r')) {
      Result<std::vector<std::string>> words = splitDirectiveWords(line.substr(6));
      if (!words.ok()) return words.status().withContext(where);
      for (size_t i = 0; i < words->size(); ++i) {
        const std::string& w = (*words)[i];
        if (w.rfind("--", 0) != 0 || w.size() == 2) {
          return Status::invalidArgument(where + ": '" + w +
                                         "' is not a flag (directives hold flags such as "
                                         "#GPOOL --gpus 2)");
        }
        std::string name = w.substr(2);
        std::optional<std::string> value;
        if (size_t eq = name.find('='); eq != std::string::npos) {
          value = name.substr(eq + 1);
          name.resize(eq);
        }
        const SubmitFlagDef* def = findSubmitFlag(name);
        if (!def) return Status::invalidArgument(where + ": " + unknownSubmitFlag(name));
        if (!def->value_name) {
          if (value) {
            return Status::invalidArgument(where + ": --" + name + " takes no value");
          }
          flags.add(name, FlagValue{"true", where});
          continue;
        }
        if (!value) {
          if (i + 1 >= words->size()) {
            return Status::invalidArgument(where + ": --" + name + " needs a value (e.g. --" +
                                           name + " " + def->value_name + ")");
          }
          value = (*words)[++i];
        }
        flags.add(name, FlagValue{*value, where});
      }
      continue;
    }
    if (trimmed.front() == '#') continue;  // "#!" and other comments
    break;                                 // the first command: directives end here
  }
  return flags;
}

Result<SubmitPlan> buildSubmitPlan(const SubmitFlags& flags, std::vector<std::string> command,
                                   const SubmitContext& context) {
  SubmitPlan plan;
  api::JobSpec& spec = plan.spec;
  spec.command = std::move(command);
  for (const auto& [name, occurrences] : flags.values) {
    if (!findSubmitFlag(name) && !occurrences.empty()) {
      return Status::invalidArgument(occurrences.back().where + ": " + unknownSubmitFlag(name));
    }
  }

  // Applies `parse` to the last value of a single-valued flag.
  auto one = [&](const std::string& flag, auto parse) -> Status {
    const FlagValue* v = last(flags, flag);
    if (!v) return Status::ok();
    Status s = parse(*v);
    return s.isOk() ? s : at(*v, flag, s);
  };
  GPOOL_RETURN_IF_ERROR(one("gpus", [&](const FlagValue& v) -> Status {
    GPOOL_ASSIGN_OR_RETURN(spec.resources.gpus_milli, parseGpuCount(v.value));
    return Status::ok();
  }));
  GPOOL_RETURN_IF_ERROR(one("gpu-mem", [&](const FlagValue& v) -> Status {
    GPOOL_ASSIGN_OR_RETURN(spec.resources.gpu_memory_mib, parseMemoryMiB(v.value));
    return Status::ok();
  }));
  GPOOL_RETURN_IF_ERROR(one("gpu-compute", [&](const FlagValue& v) -> Status {
    GPOOL_ASSIGN_OR_RETURN(spec.resources.gpu_compute_milli, parseComputeShare(v.value));
    return Status::ok();
  }));
  GPOOL_RETURN_IF_ERROR(one("cpus", [&](const FlagValue& v) -> Status {
    GPOOL_ASSIGN_OR_RETURN(spec.resources.cpus_milli, parseCpuMillis(v.value));
    return Status::ok();
  }));
  GPOOL_RETURN_IF_ERROR(one("mem", [&](const FlagValue& v) -> Status {
    GPOOL_ASSIGN_OR_RETURN(spec.resources.ram_mib, parseMemoryMiB(v.value));
    return Status::ok();
  }));
  GPOOL_RETURN_IF_ERROR(one("time", [&](const FlagValue& v) -> Status {
    GPOOL_ASSIGN_OR_RETURN(spec.time_limit_seconds, parseDuration(v.value));
    return Status::ok();
  }));
  GPOOL_RETURN_IF_ERROR(one("min-cc", [&](const FlagValue& v) -> Status {
    GPOOL_ASSIGN_OR_RETURN(spec.constraints.min_compute_capability,
                           api::parseComputeCapability(v.value));
    return Status::ok();
  }));
  GPOOL_RETURN_IF_ERROR(one("min-cuda", [&](const FlagValue& v) -> Status {
    GPOOL_ASSIGN_OR_RETURN(spec.constraints.min_cuda, api::parseCudaVersion(v.value));
    return Status::ok();
  }));
  GPOOL_RETURN_IF_ERROR(one("array", [&](const FlagValue& v) -> Status {
    GPOOL_ASSIGN_OR_RETURN(spec.array, api::parseArraySpec(v.value));
    return Status::ok();
  }));
  if (const FlagValue* v = last(flags, "tasks")) {
    GPOOL_ASSIGN_OR_RETURN(spec.tasks, parseCount(*v, "tasks", api::kMaxTasksPerJob));
  }
  if (const FlagValue* v = last(flags, "nodes")) {
    GPOOL_ASSIGN_OR_RETURN(spec.nodes, parseCount(*v, "nodes", api::kMaxTasksPerJob));
  }
  if (const FlagValue* v = last(flags, "qos")) spec.qos = v->value;
  if (const FlagValue* v = last(flags, "name")) spec.name = v->value;
  if (const FlagValue* v = last(flags, "group")) plan.group = v->value;
  spec.preemptible = last(flags, "preemptible") != nullptr;

  for (const FlagValue& v : all(flags, "gpu-model")) {
    for (const std::string& model : splitComma(v.value)) {
      if (model.empty()) return bad(v, "gpu-model", "empty model name in '" + v.value + "'");
      spec.constraints.gpu_models.push_back(model);
    }
  }

  for (const auto& [flag, kind] : {std::pair{"after", api::DependencyKind::kAfterOk},
                                   std::pair{"after-any", api::DependencyKind::kAfterAny}}) {
    for (const FlagValue& v : all(flags, flag)) {
      for (const std::string& id_text : splitComma(v.value)) {
        GPOOL_ASSIGN_OR_RETURN(uint64_t id, parseJobIdText(v, flag, id_text));
        spec.dependencies.push_back(api::Dependency{kind, id});
      }
    }
  }
  for (const FlagValue& v : all(flags, "dependency")) {
    Result<std::vector<api::Dependency>> deps = api::parseDependencyList(v.value);
    if (!deps.ok()) return at(v, "dependency", deps.status());
    spec.dependencies.insert(spec.dependencies.end(), deps->begin(), deps->end());
  }

  spec.working_dir = context.cwd;
  if (const FlagValue* v = last(flags, "workdir")) {
    if (v->value.empty() || v->value.front() != '/') {
      if (v->value.empty()) return bad(*v, "workdir", "must not be empty");
      spec.working_dir = context.cwd + (context.cwd.back() == '/' ? "" : "/") + v->value;
    } else {
      spec.working_dir = v->value;
    }
  }

  for (const FlagValue& v : all(flags, "export")) {
    for (const std::string& item : splitComma(v.value)) {
      if (item.empty()) continue;
      size_t eq = item.find('=');
      std::string var = item.substr(0, eq);
      if (var.empty()) {
        return bad(v, "export", "'" + item + "' has no variable name (use VAR=value)");
      }
      if (eq != std::string::npos) {
        spec.env[var] = item.substr(eq + 1);
        continue;
      }
      std::optional<std::string> value = context.getenv ? context.getenv(var) : std::nullopt;
      if (!value) {
        return bad(
            v, "export",
            var + " is not set in your environment (give a value: --export " + var + "=...)");
      }
      spec.env[var] = *value;
    }
  }

  if (const FlagValue* v = last(flags, "image")) {
    if (Status st = checkImageName(v->value); !st.isOk()) return at(*v, "image", st);
    spec.image = v->value;
  }
  for (const FlagValue& v : all(flags, "mount")) {
    Result<BindMount> mount = parseBindMount(v.value);
    if (!mount.ok()) return at(v, "mount", mount.status());
    if (spec.image.empty()) {
      return bad(v, "mount", "mounts go into the job's container: give --image too");
    }
    spec.mounts.push_back(formatBindMount(*mount));
  }

  if (spec.name.empty()) spec.name = context.default_name;
  if (spec.name.empty() && !spec.command.empty()) {
    const std::string& first = spec.command[0];
    size_t slash = first.find_last_of('/');
    spec.name = slash == std::string::npos ? first : first.substr(slash + 1);
  }
  spec.interactive = context.interactive;
  if (spec.command.empty() && !spec.interactive) {
    return Status::invalidArgument(
        "nothing to run: give a batch script (gpool submit train.sh) or a command after -- "
        "(gpool submit --gpus 1 -- python train.py)");
  }
  Status valid = api::validateJobSpec(spec, "job");
  if (!valid.isOk()) return valid.withContext("invalid job");
  return plan;
}

std::vector<std::string> scriptCommand(std::string_view script, const std::string& absolute_path,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> command;
  if (script.rfind("#!", 0) == 0) {
    std::string_view first = script.substr(2, script.find('\n') - 2);
    // Linux passes everything after the interpreter as one argument; so do we.
    first = trim(first);
    size_t space = first.find_first_of(" \t");
    if (!first.empty()) {
      command.emplace_back(first.substr(0, space));
      if (space != std::string_view::npos) {
        std::string_view rest = trim(first.substr(space + 1));
        if (!rest.empty()) command.emplace_back(rest);
      }
    }
  }
  if (command.empty()) command.emplace_back("/bin/sh");
  command.push_back(absolute_path);
  command.insert(command.end(), args.begin(), args.end());
  return command;
}

}  // namespace gpool::cli
